/* Replays fuzz inputs without libFuzzer: each argument is a file, or a directory whose
   files (in name order) are fed one by one to the harness it is linked with. Built with
   any compiler and sanitizer, it turns a corpus into a plain test. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    uint8_t *data = NULL;
    size_t size = 0, cap = 0, n;
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    for (;;) {
        if (size == cap) {
            uint8_t *more = (uint8_t *)realloc(data, cap = cap ? cap * 2 : 4096);
            if (!more) {
                fprintf(stderr, "replay: out of memory reading %s\n", path);
                free(data);
                fclose(f);
                return 1;
            }
            data = more;
        }
        n = fread(data + size, 1, cap - size, f);
        if (n == 0) break;
        size += n;
    }
    fclose(f);
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, size);
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *dir, unsigned *count) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0, i;
    int failed = 0;
    if (!d) {
        fprintf(stderr, "replay: cannot open %s\n", dir);
        return 1;
    }
    while ((e = readdir(d)) != NULL) {
        char *path;
        struct stat st;
        if (e->d_name[0] == '.') continue;
        path = (char *)malloc(strlen(dir) + strlen(e->d_name) + 2);
        if (!path) break;
        sprintf(path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            free(path);
            continue;
        }
        if (n == cap) {
            char **more = (char **)realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *names);
            if (!more) {
                free(path);
                break;
            }
            names = more;
        }
        names[n++] = path;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, by_name);
    for (i = 0; i < n; i++) {
        failed |= replay_file(names[i]);
        free(names[i]);
        ++*count;
    }
    free(names);
    return failed;
}

int main(int argc, char **argv) {
    unsigned count = 0;
    int i, failed = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    for (i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            failed |= replay_dir(argv[i], &count);
        } else {
            failed |= replay_file(argv[i]);
            count++;
        }
    }
    printf("replay: %u inputs, %s\n", count, failed ? "some unreadable" : "all passed");
    return failed;
}
