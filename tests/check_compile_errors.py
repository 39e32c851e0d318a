#!/usr/bin/env python3
"""Compiles SOURCE once per `#elif WRONG == n // error: MESSAGE` line in it, with -DWRONG=n,
and checks that the compiler fails with MESSAGE as its only error (an error from inside
the templates would bury it); and once with -DWRONG=0, which must compile. Usage: check_compile_errors.py SOURCE -- COMPILER [ARGS...]"""
import re
import subprocess
import sys


def compile_case(command, source, case):
    run = subprocess.run(command + ['-DWRONG=%d' % case, source],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return run.returncode, run.stdout.decode(errors='replace')


def main(argv):
    if len(argv) < 4 or argv[2] != '--':
        sys.exit(__doc__)
    source, command = argv[1], argv[3:]
    with open(source, encoding='utf-8') as f:
        cases = re.findall(r'^#(?:el)?if WRONG == (\d+) // error: (.+)$', f.read(), re.M)
    if not cases:
        sys.exit('%s: no cases' % source)
    failed = 0
    code, output = compile_case(command, source, 0)
    if code != 0:
        print('case 0 (the right shapes) does not compile:\n' + output)
        failed += 1
    for case, message in cases:
        code, output = compile_case(command, source, int(case))
        if code == 0:
            print('case %s compiles, but must not' % case)
            failed += 1
        elif message.strip() not in output or output.count('error:') != 1:
            print('case %s: not one error saying "%s":\n%s' % (case, message.strip(), output))
            failed += 1
        else:
            print('case %s: fails with "%s"' % (case, message.strip()))
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main(sys.argv)
