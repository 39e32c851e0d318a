/* Assembles the x86-64 and AArch64 switches in their Mach-O spelling (leading underscore,
   .private_extern, Mach-O section names). Built by CI with
   clang -target x86_64-apple-macos11 -ffreestanding -c tests/check_macho.c (and arm64). */
#include "../fibersched.h"
#include "../fibersched_asm.h"

#if !defined(__APPLE__) || !defined(FSCHED__CTX_ASM)
#error "expected an Apple target with the assembly backend"
#endif

void *check_macho_switch(void **save, void *load);
void *check_macho_switch(void **save, void *load) {
    static unsigned char stack[4096];
    void *sp = fsched__asm_make_stack(stack, stack + sizeof stack, (void (*)(void *))0,
                                      (void (*)(void))0);
    (void)sp;
    return fsched__asm_switch(save, load, (void *)0);
}
