/*
 * agentwrap-hook: the native hook client (issue 27).
 *
 * An agent runs its hook in a new process at every event and waits for it;
 * a Python start alone is ~50 ms. This program starts in a millisecond,
 * hands the hook's stdin to the session's supervisor over its hook socket
 * (agentwrap/surfaces/hooks/server.py says the protocol and why) and prints
 * the answer. When no supervisor takes the hook (no socket, refused, no "ok"
 * in time, anything malformed) it runs the Python hook with the same stdin:
 * that one then behaves exactly as it does without this client.
 *
 *   agentwrap-hook 1 SOCKET AGENT EVENT -- PYTHON-HOOK-ARGV...
 *
 * The session and the profile come from SESSION_ENV and PROFILE_ENV, as
 * for the Python hook. Never fails the agent: exit 0,
 * nothing printed on any error, every wait bounded; the answer is printed
 * whole or not at all.
 *
 * An answer may allow a tool, so only this user's supervisor is believed
 * (trusted_path, trusted_peer): the socket and its directory must be this
 * user's (the effective uid's) and writable by nobody else, and the process
 * listening on it must run as this user (SO_PEERCRED) -- root's included
 * only when the client runs as root: nothing of agentwrap runs as another
 * user than its agent. Anything else is not asked (nothing sent, not even
 * the payload) and the Python hook runs, which asks the same server as its
 * second client after the same checks (agentwrap/surfaces/hooks/client.py)
 * unless this client asked already (ASKED_ENV).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The wire (agentwrap/hook_wire.py, under the same names; tests/test_hook_wire.py
 * fails when one of these says otherwise). */
#define PROTOCOL "1"
#define VERB "awhook1"
#define OK "ok\n"
#define REPLY "v1"
#define MAX_STDIN (4 * 1024 * 1024)
#define MAX_ANSWER (1 << 20)
#define MAX_HEADER 512
#define MAX_REPLY_HEAD 16
#define MAX_WORD 80
#define NO_PROFILE "-"
#define ACK_WAIT_MS 1000    /* connect, send, and the supervisor's "ok" */
#define ANSWER_WAIT_MS 9000 /* the hook's run: the agents' timeout is 10 s */
#define UNSAFE_MODE 022     /* group or others may write */
#define USAGE_EXIT 64
#define SESSION_ENV "AGENTWRAP_SESSION"
#define PROFILE_ENV "AGENTWRAP_PROFILE"
#define CLIENT_ENV "AGENTWRAP_HOOK_CLIENT"
#define CLIENT_PYTHON "python"
#define ASKED_ENV "AGENTWRAP_HOOK_ASKED"

static char *input;
static size_t input_len;

static long long now_ms(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* All of stdin; 1 when it is over MAX_STDIN (drained, not kept). */
static int read_stdin(void) {
    size_t cap = 1 << 16;
    input = malloc(cap);
    if (input == NULL)
        return -1;
    for (;;) {
        if (input_len == cap) {
            if (cap > MAX_STDIN) { /* over: drain the rest, keep nothing */
                char sink[1 << 16];
                ssize_t n;
                while ((n = read(0, sink, sizeof sink)) != 0)
                    if (n < 0 && errno != EINTR)
                        break;
                return 1;
            }
            size_t more = cap * 2 > (size_t)MAX_STDIN + 1 ? (size_t)MAX_STDIN + 1 : cap * 2;
            char *bigger = realloc(input, more);
            if (bigger == NULL)
                return -1;
            input = bigger;
            cap = more;
        }
        ssize_t n = read(0, input + input_len, cap - input_len);
        if (n == 0)
            return input_len > MAX_STDIN ? 1 : 0;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        input_len += (size_t)n;
    }
}

/* Run the Python hook with the same stdin (a memory file, else an unlinked
 * temporary one). Returns only when that fails. */
static void fallback(char **argv) {
    int fd = -1;
#ifdef MFD_CLOEXEC
    fd = memfd_create("agentwrap-hook-stdin", 0);
#endif
    if (fd < 0) {
        const char *dir = getenv("TMPDIR");
        char tmpl[4096];
        int len = snprintf(tmpl, sizeof tmpl, "%s/agentwrap-hook-XXXXXX",
                           dir != NULL && *dir == '/' ? dir : "/tmp");
        if (len < 0 || (size_t)len >= sizeof tmpl)
            return;
        fd = mkstemp(tmpl);
        if (fd < 0)
            return;
        unlink(tmpl);
    }
    size_t done = 0;
    while (done < input_len) {
        ssize_t n = write(fd, input + done, input_len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(fd);
            return;
        }
        done += (size_t)n;
    }
    if (lseek(fd, 0, SEEK_SET) != 0 || dup2(fd, 0) < 0) {
        close(fd);
        return;
    }
    if (fd != 0)
        close(fd);
    execv(argv[0], argv);
}

/* A word fit for the header: 1-MAX_WORD of [A-Za-z0-9._-]. */
static int plain(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > MAX_WORD)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '_' || *s == '-'))
            return 0;
    return 1;
}

/* Wait for `events` on fd until `deadline` (monotonic ms); 1 ready, 0 not. */
static int wait_fd(int fd, short events, long long deadline) {
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return 0;
    }
}

static int send_all(int fd, const char *buf, size_t len, long long deadline) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = send(fd, buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            done += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!wait_fd(fd, POLLOUT, deadline))
                return 0;
        } else {
            return 0;
        }
    }
    return 1;
}

static char rx[MAX_ANSWER + 64];
static size_t rx_len;
static int rx_eof;

/* Read what is there now (non-blocking); 0 on an error. */
static int take(int fd) {
    while (!rx_eof && rx_len < sizeof rx) {
        ssize_t n = recv(fd, rx + rx_len, sizeof rx - rx_len, MSG_DONTWAIT);
        if (n > 0)
            rx_len += (size_t)n;
        else if (n == 0)
            rx_eof = 1;
        else if (errno == EINTR)
            continue;
        else
            return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    return 1;
}

/* Bytes of rx needed for the reply so far: -1 malformed, 0 not complete,
 * else the total length of OK + REPLY " N\n" + N (answer at *body, *body_len)
 * or that of OK alone when `want_answer` is 0. */
static long complete(int want_answer, const char **body, size_t *body_len) {
    const size_t ok = sizeof OK - 1, word = sizeof REPLY - 1;
    if (rx_len < ok)
        return memcmp(rx, OK, rx_len) == 0 ? 0 : -1;
    if (memcmp(rx, OK, ok) != 0)
        return -1;
    if (!want_answer)
        return (long)ok;
    const char *head = rx + ok, *end = rx + rx_len;
    const char *nl = memchr(head, '\n', (size_t)(end - head));
    if (nl == NULL)
        return end - head > MAX_REPLY_HEAD ? -1 : 0;
    if ((size_t)(nl - head) < word + 2 || memcmp(head, REPLY, word) != 0 || head[word] != ' ')
        return -1;
    size_t n = 0;
    for (const char *p = head + word + 1; p < nl; p++) {
        if (*p < '0' || *p > '9' || n > MAX_ANSWER)
            return -1;
        n = n * 10 + (size_t)(*p - '0');
    }
    if (n > MAX_ANSWER)
        return -1;
    if ((size_t)(end - nl - 1) < n)
        return 0;
    if ((size_t)(end - nl - 1) > n)
        return -1; /* more than announced */
    *body = nl + 1;
    *body_len = n;
    return (long)(nl + 1 + n - rx);
}

/* Wait until the reply is complete or the deadline passes; at the deadline
 * the reading side is shut *before* a last look, so what the supervisor wrote
 * before is read and what it writes after fails (it then knows). 1 complete,
 * 0 not. */
static int await_reply(int fd, int want_answer, long long deadline, const char **body,
                       size_t *body_len) {
    for (;;) {
        if (!take(fd))
            return 0;
        long got = complete(want_answer, body, body_len);
        if (got < 0)
            return 0;
        if (got > 0)
            return 1;
        if (rx_eof || rx_len == sizeof rx)
            return 0;
        if (!wait_fd(fd, POLLIN, deadline)) {
            shutdown(fd, SHUT_RD);
            if (!take(fd))
                return 0;
            return complete(want_answer, body, body_len) > 0;
        }
    }
}

static void print_all(const char *buf, size_t len) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(1, buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* the agent went away */
        done += (size_t)n;
    }
}

/* This user's, and nobody else may write it. */
static int private_to_us(const struct stat *st) {
    return st->st_uid == geteuid() && (st->st_mode & UNSAFE_MODE) == 0;
}

/* The socket at `path` and its directory are this user's alone (a socket that
 * is not, or one in a directory another user may write, may be anyone's). */
static int trusted_path(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode) || !private_to_us(&st))
        return 0;
    char dir[sizeof ((struct sockaddr_un *)0)->sun_path];
    const char *slash = strrchr(path, '/');
    size_t n = slash == NULL ? 0 : slash == path ? 1 : (size_t)(slash - path);
    if (n == 0) {
        dir[0] = '.';
        n = 1;
    } else {
        memcpy(dir, path, n);
    }
    dir[n] = '\0';
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && private_to_us(&st);
}

/* The process at the other end of `fd` runs as this user. */
static int trusted_peer(int fd) {
#ifdef SO_PEERCRED
    struct ucred cred;
    socklen_t len = sizeof cred;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof cred &&
           cred.uid == geteuid();
#else
    (void)fd;
    return 0; /* nothing to check it with: the Python hook runs */
#endif
}

/* Ask the supervisor: 1 it ran the hook (the answer printed or not), 0 it
 * did not take it (the Python hook runs). */
static int ask(const char *path, const char *agent, const char *event) {
    const char *session = getenv(SESSION_ENV);
    const char *profile = getenv(PROFILE_ENV);
    if (profile == NULL || *profile == '\0')
        profile = NO_PROFILE;
    if (session == NULL || !plain(session) || !plain(agent) || !plain(event) ||
        (strcmp(profile, NO_PROFILE) != 0 && !plain(profile)))
        return 0;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path || !trusted_path(path))
        return 0;
    memcpy(addr.sun_path, path, strlen(path) + 1);
    struct timespec wall;
    if (clock_gettime(CLOCK_REALTIME, &wall) != 0)
        return 0;
    long long start = now_ms();
    double deadline = (double)wall.tv_sec + wall.tv_nsec / 1e9 + ANSWER_WAIT_MS / 1000.0;
    char header[MAX_HEADER];
    int hlen = snprintf(header, sizeof header, VERB " %s %s %s %s %.6f %zu\n", agent, event,
                        session, profile, deadline, input_len);
    if (hlen < 0 || (size_t)hlen >= sizeof header)
        return 0;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || !trusted_peer(fd) ||
        !send_all(fd, header, (size_t)hlen, start + ACK_WAIT_MS) ||
        !send_all(fd, input, input_len, start + ACK_WAIT_MS)) {
        close(fd);
        return 0;
    }
    const char *body = NULL;
    size_t body_len = 0;
    if (!await_reply(fd, 0, start + ACK_WAIT_MS, &body, &body_len)) {
        close(fd);
        return 0; /* no "ok": the supervisor runs nothing for it */
    }
    if (await_reply(fd, 1, start + ANSWER_WAIT_MS, &body, &body_len) && body_len > 0) {
        print_all(body, body_len);
        print_all("\n", 1);
    }
    close(fd);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 7 || strcmp(argv[1], PROTOCOL) != 0 || strcmp(argv[5], "--") != 0) {
        dprintf(2, "agentwrap-hook: protocol %s expected: agentwrap-hook %s SOCKET AGENT EVENT"
                   " -- PYTHON-HOOK...\n", PROTOCOL, PROTOCOL);
        return USAGE_EXIT;
    }
    int over = read_stdin();
    if (over == 1)
        return 0; /* the Python hook ignores a payload that big too */
    if (over == 0) {
        const char *force = getenv(CLIENT_ENV);
        if (force == NULL || strcmp(force, CLIENT_PYTHON) != 0) {
            if (ask(argv[2], argv[3], argv[4]))
                return 0;
            setenv(ASKED_ENV, "1", 1); /* not taken: the Python hook runs it at once */
        }
    } else {
        input_len = 0; /* unreadable stdin: the Python hook reads it as empty */
        setenv(ASKED_ENV, "1", 1);
    }
    fallback(argv + 6);
    return 0;
}
