// The process host's side of starting a child (see process-host.c): its environment, and in
// the forked child, what it must not inherit from the worker, then exec on the PATH of its
// own environment. A failure before or at exec is written to `report` (a close-on-exec pipe
// the worker reads until it closes) as {stage, errno}.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif
#include "process-host.h"

#ifndef NSIG
#define NSIG 65
#endif

extern char **environ;

#define DEFAULT_PATH "/usr/bin:/bin"

static _Noreturn void child_fail(int report, uint8_t stage) {
  int32_t msg[2] = {stage, errno};
  ssize_t r = write(report, msg, sizeof msg);
  (void)r;
  _exit(127);
}

static const char *env_get(char **envp, const char *key) {
  size_t k = strlen(key);
  for (char **e = envp; *e; e++)
    if (strncmp(*e, key, k) == 0 && (*e)[k] == '=') return *e + k + 1;
  return NULL;
}

// execvp on the PATH of the child's environment (not the worker's): a spec's PATH finds its tools.
static void exec_search(const char *cmd, char **argv, char **envp) {
  if (strchr(cmd, '/')) {
    execve(cmd, argv, envp);
    return;
  }
  if (!*cmd) {
    errno = ENOENT;
    return;
  }
  const char *path = env_get(envp, "PATH");
  if (!path) path = DEFAULT_PATH;
  size_t clen = strlen(cmd);
  int denied = 0;
  for (const char *p = path;; p++) {
    const char *end = strchr(p, ':');
    if (!end) end = p + strlen(p);
    size_t dlen = (size_t)(end - p);
    char full[4096];
    if (dlen + 1 + clen + 1 <= sizeof full) {
      if (dlen == 0) {
        full[0] = '.';
        dlen = 1;
      } else {
        memcpy(full, p, dlen);
      }
      full[dlen] = '/';
      memcpy(full + dlen + 1, cmd, clen + 1);
      execve(full, argv, envp);
      if (errno == EACCES) denied = 1;
      else if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP && errno != ENAMETOOLONG) return;
    }
    if (!*end) break;
    p = end;
  }
  errno = denied ? EACCES : ENOENT;
}

// glibc's sigaction refuses the two signals it keeps for itself (32 and 33: thread
// cancellation, setxid), and its posix_spawn leaves them ignored in the child it starts (GNU
// make starts commands so): ignored they would stay through exec, into terraform. The kernel's
// own call sets them back to the default. Its struct is this on x86_64 and arm64.
static void default_reserved_signal(int s) {
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
  struct {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
  } act = {SIG_DFL, 0, NULL, 0};
  syscall(SYS_rt_sigaction, s, &act, NULL, sizeof act.mask);
#else
  (void)s;
#endif
}

_Noreturn void child_exec(int flags, int in, int out, int err, int report, const char *cwd, char **argv, char **envp) {
  // SIG_IGN survives exec: terraform must get SIGINT, SIGTERM and SIGPIPE as usual.
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int s = 1; s < NSIG; s++)
    if (sigaction(s, &dfl, NULL) != 0) default_reserved_signal(s); // SIGKILL, SIGSTOP: refused, harmless
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if ((flags & F_DETACHED) && setsid() < 0) child_fail(report, STAGE_HOST);
  // 0-2 are the worker's own (always open), so none of these is already its target.
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) child_fail(report, STAGE_HOST);
  if (chdir(cwd) != 0) child_fail(report, STAGE_CHDIR);
  exec_search(argv[0], argv, envp);
  child_fail(report, STAGE_EXEC);
}

// The worker's environment with the request's K=V entries added or overriding them.
char **merge_env(char **extra, uint32_t n) {
  size_t count = 0;
  for (char **e = environ; *e; e++) count++;
  char **env = xrealloc(NULL, (count + n + 1) * sizeof *env);
  size_t k = 0;
  for (char **e = environ; *e; e++) {
    const char *eq = strchr(*e, '=');
    size_t klen = eq ? (size_t)(eq - *e) : strlen(*e);
    int overridden = 0;
    for (uint32_t i = 0; i < n && !overridden; i++)
      overridden = strncmp(extra[i], *e, klen) == 0 && extra[i][klen] == '=';
    if (!overridden) env[k++] = *e;
  }
  for (uint32_t i = 0; i < n; i++) env[k++] = extra[i];
  env[k] = NULL;
  return env;
}

// After exec, for a detached child: where the kernel schedules by session ("autogroup":
// processes outside any CPU cgroup, e.g. a server on a plain Linux host, not in a container),
// each session gets an equal share of the CPU whatever the nice of its processes, so four
// terraform runs would take four shares against the server's one. The session's group gets
// our nice instead. Best effort: the file is absent without autogroup support.
void nice_session(pid_t pid) {
#ifdef __linux__
  char file[64];
  snprintf(file, sizeof file, "/proc/%d/autogroup", (int)pid);
  int fd = open(file, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t r = write(fd, "10", 2);
  (void)r;
  close(fd);
#else
  (void)pid;
#endif
}
