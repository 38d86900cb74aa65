// The server's process host: starts every child process of the server (git, terraform, run
// steps) and reports its pid, output and exit. Why a process of its own: a spawn forks the
// process that calls it. Forking the (large) server from its event loop blocks the loop for
// each child; from a worker thread it still stalls it, because fork copies the page tables
// while holding the address-space lock that the main thread's page faults and garbage
// collector wait for. This process is small, so its forks are cheap and touch nothing of the
// server's memory. Why C: it only relays bytes; a Node.js process doing that keeps ~50 MiB
// resident (the node binary's pages and a heap), this one 1-3 MiB. Signals are sent by the
// server itself (it knows the pids). The framing is documented in ../process-host-protocol.ts.
//
// fd 0: requests from the server; fd 1: events to the server; fd 2: the server's stderr.
// Built by hack/bundle.mjs (with exec-child.c) into dist/native/process-host. POSIX;
// Linux-only parts marked.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include "process-host.h"

#define REQ_FD 0
#define EVT_FD 1
// A request is a command line and an environment: far below this. Anything larger is a bug.
#define MAX_FRAME (16u << 20)
#define CHUNK 65536
// A 'capture' child's stdout and stderr together, at most (git and version checks: far less).
// Past it the child is killed and its exit is a failure: its memory would be the worker's,
// then the server's, and a shortened output would be read as the whole.
#define MAX_CAPTURE (64u << 20)

enum { REQ_SPAWN = 1 };
enum { EVT_STARTED = 1, EVT_OUTPUT = 2, EVT_EXIT = 3 };
enum { EXIT_CODE = 0, EXIT_SIGNAL = 1, EXIT_ERROR = 2 };

struct buf {
  char *p;
  size_t len, cap;
};

struct child {
  uint32_t id;
  pid_t pid;
  int capture;
  int out[2]; // combined output ('stream') or stdout + stderr ('capture'); -1 once at EOF
  struct buf kept[2];
  int too_much; // killed: its capture passed MAX_CAPTURE
  int reaped, status;
  int64_t t0, ms;
  struct child *next;
};

static struct child *children;
static int sigchld_pipe[2];

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("process-host: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) die("out of memory (%zu bytes)", n);
  return q;
}

static void buf_add(struct buf *b, const void *p, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
  }
  memcpy(b->p + b->len, p, n);
  b->len += n;
}

static void put_u32(uint8_t *p, uint32_t v) {
  p[0] = v & 0xff;
  p[1] = (v >> 8) & 0xff;
  p[2] = (v >> 16) & 0xff;
  p[3] = (v >> 24) & 0xff;
}

static uint32_t get_u32le(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int cloexec_pipe(int fds[2]) {
#ifdef __linux__
  return pipe2(fds, O_CLOEXEC);
#else
  if (pipe(fds) != 0) return -1;
  fcntl(fds[0], F_SETFD, FD_CLOEXEC); // one thread: no fork in between
  fcntl(fds[1], F_SETFD, FD_CLOEXEC);
  return 0;
#endif
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

// Blocking write of a whole buffer (the server always reads). The server gone: nobody is left
// to tell, and children go on as they would have had the server started them itself.
static void write_all(const void *data, size_t n) {
  const char *p = data;
  while (n > 0) {
    ssize_t w = write(EVT_FD, p, n);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && errno == EAGAIN) {
      struct pollfd pfd = {.fd = EVT_FD, .events = POLLOUT};
      poll(&pfd, 1, -1);
    } else if (w < 0 && errno == EPIPE) {
      exit(0);
    } else {
      die("writing to the server: %s", strerror(errno));
    }
  }
}

// Events are queued and written once per turn of the main loop: one read for the server
// where there would be one per chunk of each child's output.
static struct buf events;

static void flush_events(void) {
  if (!events.len) return;
  write_all(events.p, events.len);
  events.len = 0;
  if (events.cap > 4 * CHUNK) { // a large capture: do not keep its memory
    free(events.p);
    events = (struct buf){0};
  }
}

// Frame: u32 length (LE) + payload; payload starts with the type and the child's id.
static void send_event(uint8_t type, uint32_t id, const void *body, size_t n) {
  uint8_t head[9];
  put_u32(head, (uint32_t)(5 + n));
  head[4] = type;
  put_u32(head + 5, id);
  buf_add(&events, head, sizeof head);
  if (n) buf_add(&events, body, n);
}

static void send_started(uint32_t id, pid_t pid) {
  uint8_t body[4];
  put_u32(body, (uint32_t)pid);
  send_event(EVT_STARTED, id, body, sizeof body);
}

// exit: u8 kind, i32 value (code, signal number or errno), u32 duration ms, u8 stage,
// then stdout and stderr as u32 length + bytes ('capture'; empty otherwise).
static void send_exit(uint32_t id, uint8_t kind, int32_t value, int64_t ms, uint8_t stage, struct buf *kept) {
  struct buf b = {0};
  uint8_t f[10];
  f[0] = kind;
  put_u32(f + 1, (uint32_t)value);
  put_u32(f + 5, (uint32_t)(ms < 0 ? 0 : ms > UINT32_MAX ? UINT32_MAX : ms));
  f[9] = stage;
  buf_add(&b, f, sizeof f);
  for (int i = 0; i < 2; i++) {
    uint8_t n[4];
    size_t len = kept ? kept[i].len : 0;
    put_u32(n, (uint32_t)len);
    buf_add(&b, n, 4);
    if (len) buf_add(&b, kept[i].p, len);
  }
  send_event(EVT_EXIT, id, b.p, b.len);
  free(b.p);
}

static void on_sigchld(int sig) {
  (void)sig;
  int saved = errno;
  ssize_t r = write(sigchld_pipe[1], "x", 1);
  (void)r; // full: a wake-up is already pending
  errno = saved;
}

static void spawn_child(uint32_t id, uint8_t flags, const char *cwd, char **argv, char **envp) {
  int capture = (flags & F_CAPTURE) != 0;
  int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1}, report[2] = {-1, -1};
  int64_t t0 = now_ms();
  int ok = cloexec_pipe(out) == 0 && (!capture || cloexec_pipe(err) == 0) && cloexec_pipe(report) == 0;
  if (ok && (flags & F_STDIN_PIPE)) ok = cloexec_pipe(in) == 0;
  else if (ok) ok = (in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;
  pid_t pid = -1;
  if (ok) {
    t0 = now_ms();
    pid = fork();
    ok = pid >= 0;
  }
  if (!ok) {
    int e = errno;
    close_fd(&out[0]), close_fd(&out[1]), close_fd(&err[0]), close_fd(&err[1]);
    close_fd(&in[0]), close_fd(&in[1]), close_fd(&report[0]), close_fd(&report[1]);
    send_exit(id, EXIT_ERROR, e, now_ms() - t0, STAGE_HOST, NULL);
    return;
  }
  if (pid == 0) child_exec(flags, in[0], out[1], capture ? err[1] : out[1], report[1], cwd, argv, envp);

  // 'pipe' stdin: closed at once, the child reads EOF.
  close_fd(&in[0]), close_fd(&in[1]), close_fd(&out[1]), close_fd(&err[1]), close_fd(&report[1]);
  // Waits for the exec (the pipe closes with it) or its failure.
  int32_t failed[2];
  ssize_t r;
  do r = read(report[0], failed, sizeof failed);
  while (r < 0 && errno == EINTR);
  close_fd(&report[0]);
  if (r == (ssize_t)sizeof failed) {
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    close_fd(&out[0]), close_fd(&err[0]);
    send_exit(id, EXIT_ERROR, failed[1], now_ms() - t0, (uint8_t)failed[0], NULL);
    return;
  }
  if (flags & F_DETACHED) nice_session(pid);
  struct child *c = xrealloc(NULL, sizeof *c);
  memset(c, 0, sizeof *c);
  c->id = id;
  c->pid = pid;
  c->capture = capture;
  c->out[0] = out[0];
  c->out[1] = err[0];
  c->t0 = t0;
  c->next = children;
  children = c;
  send_started(id, pid); // before any output: events go out in order
}

// ---- requests ------------------------------------------------------------------------------

struct cursor {
  const uint8_t *p;
  size_t left;
};

static uint32_t take_u32(struct cursor *c) {
  if (c->left < 4) die("malformed request: truncated");
  uint32_t v = get_u32le(c->p);
  c->p += 4;
  c->left -= 4;
  return v;
}

static uint8_t take_u8(struct cursor *c) {
  if (c->left < 1) die("malformed request: truncated");
  c->left--;
  return *c->p++;
}

static char *take_str(struct cursor *c) {
  uint32_t n = take_u32(c);
  if (n > c->left) die("malformed request: string of %u bytes past the end", n);
  if (memchr(c->p, 0, n)) die("malformed request: NUL byte in a string");
  char *s = xrealloc(NULL, (size_t)n + 1);
  memcpy(s, c->p, n);
  s[n] = 0;
  c->p += n;
  c->left -= n;
  return s;
}

// spawn: u32 id, u8 flags, str command, str cwd, u32 argc + str each, u32 envc + str each (K=V).
static void handle_request(const uint8_t *p, size_t n) {
  struct cursor c = {p, n};
  uint8_t type = take_u8(&c);
  if (type != REQ_SPAWN) die("malformed request: type %u", type);
  uint32_t id = take_u32(&c);
  uint8_t flags = take_u8(&c);
  char *command = take_str(&c);
  char *cwd = take_str(&c);
  uint32_t argc = take_u32(&c);
  if (argc > c.left / 4) die("malformed request: %u arguments", argc);
  char **argv = xrealloc(NULL, ((size_t)argc + 2) * sizeof *argv);
  argv[0] = command;
  for (uint32_t i = 0; i < argc; i++) argv[i + 1] = take_str(&c);
  argv[argc + 1] = NULL;
  uint32_t envc = take_u32(&c);
  if (envc > c.left / 4) die("malformed request: %u environment entries", envc);
  char **extra = xrealloc(NULL, ((size_t)envc + 1) * sizeof *extra);
  for (uint32_t i = 0; i < envc; i++) {
    extra[i] = take_str(&c);
    if (!strchr(extra[i], '=') || extra[i][0] == '=') die("malformed request: environment entry without a name");
  }
  if (c.left) die("malformed request: %zu bytes after the end", c.left);
  char **envp = merge_env(extra, envc);
  spawn_child(id, flags, cwd, argv, envp);
  free(envp);
  for (uint32_t i = 0; i < envc; i++) free(extra[i]);
  free(extra);
  for (uint32_t i = 0; i <= argc; i++) free(argv[i]);
  free(argv);
  free(cwd);
}

static struct buf requests;

// Reads what the server sent and handles each whole frame; EOF: the server is gone.
static void read_requests(void) {
  char tmp[CHUNK];
  ssize_t r = read(REQ_FD, tmp, sizeof tmp);
  if (r < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (r < 0) die("reading requests: %s", strerror(errno));
  // Children are left as they would be had the server started them itself: a detached
  // terraform runs on, its output pipe closes with us.
  if (r == 0) exit(0);
  buf_add(&requests, tmp, (size_t)r);
  size_t at = 0;
  while (requests.len - at >= 4) {
    uint32_t n = get_u32le((uint8_t *)requests.p + at);
    if (n == 0 || n > MAX_FRAME) die("malformed request: frame of %u bytes", n);
    if (requests.len - at - 4 < n) break;
    handle_request((uint8_t *)requests.p + at + 4, n);
    at += 4 + (size_t)n;
  }
  memmove(requests.p, requests.p + at, requests.len - at);
  requests.len -= at;
}

// ---- children's output and exit --------------------------------------------------------------

static void read_output(struct child *c, int i) {
  static char tmp[CHUNK];
  ssize_t r = read(c->out[i], tmp, sizeof tmp);
  if (r < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (r <= 0) {
    close_fd(&c->out[i]);
  } else if (c->capture) {
    if (c->too_much) return; // read to EOF, not kept
    if (c->kept[0].len + c->kept[1].len + (size_t)r > MAX_CAPTURE) {
      c->too_much = 1;
      if (!c->reaped) kill(c->pid, SIGKILL);
      for (int k = 0; k < 2; k++) {
        free(c->kept[k].p);
        c->kept[k] = (struct buf){0};
      }
      return;
    }
    buf_add(&c->kept[i], tmp, (size_t)r);
  } else {
    send_event(EVT_OUTPUT, c->id, tmp, (size_t)r);
  }
}

static void reap(void) {
  char drain[64];
  while (read(sigchld_pipe[0], drain, sizeof drain) > 0) {
  }
  for (;;) {
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid <= 0) {
      if (pid < 0 && errno == EINTR) continue;
      return;
    }
    for (struct child *c = children; c; c = c->next)
      if (c->pid == pid) {
        c->reaped = 1;
        c->status = st;
        c->ms = now_ms() - c->t0;
      }
  }
}

// The exit goes out once the child is reaped and its output is all read: no output after it.
static void finish_done(void) {
  for (struct child **pc = &children; *pc;) {
    struct child *c = *pc;
    if (!c->reaped || c->out[0] >= 0 || c->out[1] >= 0) {
      pc = &c->next;
      continue;
    }
    if (c->too_much) send_exit(c->id, EXIT_ERROR, EFBIG, c->ms, STAGE_OUTPUT, c->kept);
    else if (WIFSIGNALED(c->status)) send_exit(c->id, EXIT_SIGNAL, WTERMSIG(c->status), c->ms, STAGE_NONE, c->kept);
    else send_exit(c->id, EXIT_CODE, WEXITSTATUS(c->status), c->ms, STAGE_NONE, c->kept);
    *pc = c->next;
    free(c->kept[0].p);
    free(c->kept[1].p);
    free(c);
  }
}

int main(void) {
  // Run at nice 10, as do the children (inherited): under a full CPU the server's event loop
  // (webhook intake, /status, probes) goes before forking and terraform. Only ever lowered: a
  // container may start at a higher nice already, and an unprivileged process may not raise it.
  errno = 0;
  int prio = getpriority(PRIO_PROCESS, 0);
  if (!(prio == -1 && errno) && prio < NICE) setpriority(PRIO_PROCESS, 0, NICE);
#ifdef __linux__
  // The spawn requests hold git's token (in git's environment): like the server, this process
  // is non-dumpable so that terraform cannot read its memory (secrets/non-dumpable.ts). Its
  // environment is already clean. Best effort: the server has said at start if it cannot.
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
#endif
  // A signal meant for the server's process group (Ctrl-C in a terminal) is the server's to
  // act on: it interrupts terraform by pid. We stay until the server goes (EOF on fd 0).
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  if (fcntl(2, F_GETFD) < 0) open("/dev/null", O_WRONLY); // fd 2 for a child's dup2, never a pipe of ours
  if (fcntl(REQ_FD, F_GETFD) < 0 || fcntl(EVT_FD, F_GETFD) < 0) die("fd 0 and 1 must be the server's pipes");
  if (cloexec_pipe(sigchld_pipe) != 0) die("pipe: %s", strerror(errno));
  fcntl(sigchld_pipe[0], F_SETFL, O_NONBLOCK);
  fcntl(sigchld_pipe[1], F_SETFL, O_NONBLOCK);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigchld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGCHLD, &sa, NULL);

  struct pollfd *fds = NULL;
  struct child **owner = NULL;
  int *which = NULL;
  size_t room = 0;
  for (;;) {
    size_t n = 0;
    for (struct child *c = children; c; c = c->next) n += 2;
    if (n + 2 > room) {
      room = (n + 2) * 2;
      fds = xrealloc(fds, room * sizeof *fds);
      owner = xrealloc(owner, room * sizeof *owner);
      which = xrealloc(which, room * sizeof *which);
    }
    size_t k = 0;
    fds[k++] = (struct pollfd){.fd = REQ_FD, .events = POLLIN};
    fds[k++] = (struct pollfd){.fd = sigchld_pipe[0], .events = POLLIN};
    for (struct child *c = children; c; c = c->next)
      for (int i = 0; i < 2; i++)
        if (c->out[i] >= 0) {
          owner[k] = c;
          which[k] = i;
          fds[k++] = (struct pollfd){.fd = c->out[i], .events = POLLIN};
        }
    flush_events();
    if (poll(fds, (nfds_t)k, -1) < 0) {
      if (errno == EINTR) continue;
      die("poll: %s", strerror(errno));
    }
    for (size_t j = 2; j < k; j++)
      if (fds[j].revents) read_output(owner[j], which[j]);
    if (fds[1].revents) reap();
    finish_done();
    if (fds[0].revents) read_requests();
  }
}
