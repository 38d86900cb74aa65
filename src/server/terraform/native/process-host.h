// What process-host.c and exec-child.c share.
#ifndef PROCESS_HOST_H
#define PROCESS_HOST_H
#include <stdint.h>
#include <sys/types.h>

#define NICE 10

enum { F_DETACHED = 1, F_STDIN_PIPE = 2, F_CAPTURE = 4 };
enum { STAGE_NONE = 0, STAGE_EXEC = 1, STAGE_CHDIR = 2, STAGE_HOST = 3, STAGE_OUTPUT = 4 };

void *xrealloc(void *p, size_t n);
/** The worker's environment with `extra` (K=V) added or overriding; the strings are not copied. */
char **merge_env(char **extra, uint32_t n);
/** In the forked child: never returns. */
_Noreturn void child_exec(int flags, int in, int out, int err, int report, const char *cwd, char **argv, char **envp);
/** After exec, for a detached child (Linux; best effort). */
void nice_session(pid_t pid);
#endif
