/*
 * agentwrap-relay: the pty backend's byte copier.
 *
 * Why a C helper: a pty hands out at most ~4 KB per read, so a fast agent
 * means tens of thousands of read/write pairs a second. CPython pays ~15 us
 * of interpreter overhead per pair and shares one GIL with the detector, which
 * capped the in-process relay at 0.6-0.9x of script(1). This program does
 * only what script(1) does - read the agent, write the person's terminal -
 * plus two cheap extras, and leaves everything that needs Python (the virtual
 * screen, the detector, delivery) to the supervisor process that started it.
 *
 *   agentwrap-relay PROTO MASTER TEE CONTROL EVENTS INPUT OUTPUT
 *
 * PROTO must equal RELAY_PROTOCOL (a stale binary refuses to run, exit 64).
 * The rest are inherited file descriptors, -1 for "none":
 *
 *   MASTER   the agent's pty master. Every byte written to the agent goes
 *            through this program, so the person's keys and injected text
 *            are one ordered stream and can never interleave.
 *   TEE      pipe to the supervisor: a copy of the agent's output for the
 *            virtual screen. Written non-blocking: when the pipe is full
 *            the relay stops writing it (a "gap") and only keeps the last
 *            RING_SIZE bytes; once output pauses for GAP_QUIET_NS, or every
 *            GAP_FLUSH_NS during a flood, it reports the gap and writes
 *            that tail. The supervisor's screen only ever needs the tail
 *            (it resyncs from the last 16 KB anyway), so a flood costs it
 *            a few small reads a second and the person's terminal nothing.
 *   CONTROL  pipe from the supervisor: injections, framed as
 *            {uint32 id, uint32 length, bytes} in host byte order.
 *   EVENTS   pipe to the supervisor: 9-byte records {char kind, uint64
 *            value}, host byte order:
 *              'I' the person typed (value: bytes), at most one per 10 ms
 *              'D' injection `value` has been written to the agent in full
 *              'G' tee bytes after offset `value` were dropped (a gap); it
 *                  is written before any tee byte that follows the gap, and
 *                  the bytes that follow are the output's latest tail
 *              'B' bracketed-paste mode of the agent is now `value` (0/1)
 *              'E' the agent's side of the pty closed; the relay ends
 *   INPUT    the person's terminal (read), OUTPUT the person's terminal
 *            (written, blocking, like script(1)).
 *
 * If the supervisor goes away (EPIPE, control EOF) the relay keeps copying
 * bytes until the agent exits: the person keeps their agent.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RELAY_PROTOCOL "1"
#define READ_SIZE 65536
#define PENDING_LIMIT (8u << 20) /* stop taking input while this much waits */
#define INPUT_EVENT_NS 10000000LL
#define RING_SIZE 32768             /* the tail kept during a gap: > one 200x50 redraw */
#define GAP_QUIET_NS 5000000LL      /* output paused this long: send the tail now */
#define GAP_FLUSH_NS 20000000LL     /* ... or this often while a flood goes on: less than
                                       the supervisor's pause_s (30 ms), so a flood reads
                                       as one stream of output, not as pauses */

struct buf {
    unsigned char *p;
    size_t len, cap;
};

struct waiter {
    uint64_t end; /* total bytes queued for the agent when this injection ends */
    uint32_t id;
};

static int master = -1, tee_fd = -1, ctl_fd = -1, ev_fd = -1, in_fd = -1, out_fd = -1;
static struct buf pending, ctl;
static struct waiter *waiters;
static size_t n_waiters, cap_waiters;
static uint64_t queued, written, teed;
static int in_gap, bracketed;
static unsigned char seam[7];
static size_t seam_len;
static long long last_input_event, last_output, gap_since;
static unsigned char ring[RING_SIZE];
static size_t ring_len, ring_head; /* bytes held; where the next byte goes */

static void die(const char *what) {
    dprintf(2, "agentwrap-relay: %s: %s\r\n", what, strerror(errno));
    exit(70);
}

static void put(struct buf *b, const void *data, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) die("out of memory");
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void consume(struct buf *b, size_t n) {
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The supervisor is gone: stop talking to it, keep relaying. */
static void lose_supervisor(void) {
    if (tee_fd >= 0) close(tee_fd);
    if (ev_fd >= 0) close(ev_fd);
    if (ctl_fd >= 0) close(ctl_fd);
    tee_fd = ev_fd = ctl_fd = -1;
}

static void emit(char kind, uint64_t value) {
    unsigned char rec[9];
    rec[0] = (unsigned char)kind;
    memcpy(rec + 1, &value, 8);
    size_t off = 0;
    while (ev_fd >= 0 && off < sizeof rec) {
        ssize_t n = write(ev_fd, rec + off, sizeof rec - off);
        if (n > 0) {
            off += (size_t)n;
        } else if (n < 0 && errno != EINTR) {
            lose_supervisor();
        }
    }
}

/* Blocking write of everything, as script(1) does: a slow terminal slows the
 * agent, never the other way round. A terminal that went away is dropped. */
static void write_out(const unsigned char *p, size_t n) {
    while (out_fd >= 0 && n) {
        ssize_t w = write(out_fd, p, n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EAGAIN) {
            struct pollfd pf = {out_fd, POLLOUT, 0};
            poll(&pf, 1, 1000);
        } else if (w < 0 && errno != EINTR) {
            out_fd = -1;
        }
    }
}

static void ring_put(const unsigned char *p, size_t n) {
    if (n >= RING_SIZE) {
        memcpy(ring, p + n - RING_SIZE, RING_SIZE);
        ring_len = RING_SIZE;
        ring_head = 0;
        return;
    }
    size_t first = RING_SIZE - ring_head < n ? RING_SIZE - ring_head : n;
    memcpy(ring + ring_head, p, first);
    memcpy(ring, p + first, n - first);
    ring_head = (ring_head + n) % RING_SIZE;
    ring_len = ring_len + n > RING_SIZE ? RING_SIZE : ring_len + n;
}

/* Write what we can; on a short write, the rest goes to the ring and a gap begins. */
static void tee_write(const unsigned char *p, size_t n) {
    ssize_t w;
    do {
        w = write(tee_fd, p, n);
    } while (w < 0 && errno == EINTR);
    if (w < 0) {
        if (errno != EAGAIN) {
            lose_supervisor();
            return;
        }
        w = 0;
    }
    teed += (uint64_t)w;
    if ((size_t)w < n) {
        in_gap = 1;
        gap_since = now_ns();
        ring_len = ring_head = 0;
        ring_put(p + w, n - (size_t)w);
    }
}

static void copy_to_tee(const unsigned char *p, size_t n) {
    if (tee_fd < 0) return;
    if (in_gap) {
        ring_put(p, n);
        return;
    }
    tee_write(p, n);
}

/* End a gap: say where it is, then send the tail (which may start another). */
static void flush_gap(void) {
    unsigned char tail[RING_SIZE];
    size_t start = (ring_head + RING_SIZE - ring_len) % RING_SIZE;
    size_t first = RING_SIZE - start < ring_len ? RING_SIZE - start : ring_len;
    memcpy(tail, ring + start, first);
    memcpy(tail + first, ring, ring_len - first);
    size_t n = ring_len;
    in_gap = 0;
    ring_len = ring_head = 0;
    emit('G', teed);
    if (tee_fd >= 0 && n) tee_write(tail, n);
}

/* Track ESC [ ? 2004 h / l across reads: the supervisor must know whether
 * to wrap a paste in brackets even when the tee dropped the bytes. */
static void scan_bracketed(const unsigned char *p, size_t n) {
    static const char pat[] = "\x1b[?2004";
    int mode = bracketed;
    unsigned char window[14];
    size_t head = n < 7 ? n : 7;
    memcpy(window, seam, seam_len);
    memcpy(window + seam_len, p, head);
    size_t wlen = seam_len + head;
    for (size_t i = 0; i < seam_len && i + 8 <= wlen; i++) {
        if (memcmp(window + i, pat, 7) == 0) {
            if (window[i + 7] == 'h') mode = 1;
            if (window[i + 7] == 'l') mode = 0;
        }
    }
    const unsigned char *at = p, *end = p + n;
    while ((at = memmem(at, (size_t)(end - at), pat, 7)) != NULL) {
        if (at + 7 < end) {
            if (at[7] == 'h') mode = 1;
            if (at[7] == 'l') mode = 0;
        }
        at++;
    }
    if (n >= 7) {
        memcpy(seam, end - 7, 7);
        seam_len = 7;
    } else {
        size_t keep = seam_len + n > 7 ? 7 - n : seam_len;
        memmove(seam, seam + seam_len - keep, keep);
        memcpy(seam + keep, p, n);
        seam_len = keep + n;
    }
    if (mode != bracketed) {
        bracketed = mode;
        emit('B', (uint64_t)mode);
    }
}

static void report_written(void) {
    size_t done = 0;
    while (done < n_waiters && waiters[done].end <= written) emit('D', waiters[done++].id);
    if (done) {
        memmove(waiters, waiters + done, (n_waiters - done) * sizeof *waiters);
        n_waiters -= done;
    }
}

static void flush_pending(void) {
    while (pending.len) {
        ssize_t w = write(master, pending.p, pending.len);
        if (w > 0) {
            consume(&pending, (size_t)w);
            written += (uint64_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && errno == EAGAIN) {
            break;
        } else { /* the agent is gone: nothing will ever read this */
            written += pending.len;
            pending.len = 0;
        }
    }
    report_written();
}

static void take_control(void) {
    while (ctl.len >= 8) {
        uint32_t id, len;
        memcpy(&id, ctl.p, 4);
        memcpy(&len, ctl.p + 4, 4);
        if (ctl.len < 8 + (size_t)len) return;
        put(&pending, ctl.p + 8, len);
        queued += len;
        if (n_waiters == cap_waiters) {
            cap_waiters = cap_waiters ? cap_waiters * 2 : 16;
            waiters = realloc(waiters, cap_waiters * sizeof *waiters);
            if (!waiters) die("out of memory");
        }
        waiters[n_waiters++] = (struct waiter){queued, id};
        consume(&ctl, 8 + (size_t)len);
    }
}

static int read_fd(int fd, unsigned char *buf, size_t size) {
    ssize_t n;
    do {
        n = read(fd, buf, size);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN) return -1;
    return n < 0 ? 0 : (int)n; /* errors end the stream like EOF does */
}

static int parse_fd(const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < -1 || v > 65535) {
        dprintf(2, "agentwrap-relay: bad file descriptor %s\n", s);
        exit(64);
    }
    return (int)v;
}

int main(int argc, char **argv) {
    static unsigned char buf[READ_SIZE];
    if (argc != 8 || strcmp(argv[1], RELAY_PROTOCOL) != 0) {
        dprintf(2, "agentwrap-relay: protocol %s expected (this binary is stale or misused)\n",
                RELAY_PROTOCOL);
        return 64;
    }
    master = parse_fd(argv[2]);
    tee_fd = parse_fd(argv[3]);
    ctl_fd = parse_fd(argv[4]);
    ev_fd = parse_fd(argv[5]);
    in_fd = parse_fd(argv[6]);
    out_fd = parse_fd(argv[7]);
    if (master < 0) {
        dprintf(2, "agentwrap-relay: no pty master\n");
        return 64;
    }
    signal(SIGPIPE, SIG_IGN);
    fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
    if (tee_fd >= 0) fcntl(tee_fd, F_SETFL, fcntl(tee_fd, F_GETFL) | O_NONBLOCK);
    if (ctl_fd >= 0) fcntl(ctl_fd, F_SETFL, fcntl(ctl_fd, F_GETFL) | O_NONBLOCK);

    for (;;) {
        struct pollfd pf[3];
        int np = 0, i_in = -1, i_ctl = -1;
        pf[np++] = (struct pollfd){master, (short)(POLLIN | (pending.len ? POLLOUT : 0)), 0};
        int room = pending.len < PENDING_LIMIT;
        if (in_fd >= 0 && room) {
            i_in = np;
            pf[np++] = (struct pollfd){in_fd, POLLIN, 0};
        }
        if (ctl_fd >= 0 && room) {
            i_ctl = np;
            pf[np++] = (struct pollfd){ctl_fd, POLLIN, 0};
        }
        int timeout = in_gap ? (int)(GAP_QUIET_NS / 1000000) : -1;
        int ready = poll(pf, (nfds_t)np, timeout);
        if (ready < 0) {
            if (errno == EINTR) continue;
            die("poll");
        }
        if (pf[0].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) {
            int n = read_fd(master, buf, sizeof buf);
            if (n == 0) break; /* EIO: every slave fd is closed, the agent exited */
            if (n > 0) {
                write_out(buf, (size_t)n);
                scan_bracketed(buf, (size_t)n);
                copy_to_tee(buf, (size_t)n);
                if (in_gap) last_output = now_ns();
            }
        }
        if (in_gap) {
            long long t = now_ns();
            if (t - last_output >= GAP_QUIET_NS || t - gap_since >= GAP_FLUSH_NS) flush_gap();
        }
        if (pf[0].revents & POLLOUT) flush_pending();
        if (i_in >= 0 && pf[i_in].revents) {
            int n = read_fd(in_fd, buf, sizeof buf);
            if (n == 0) {
                in_fd = -1; /* the person's input ended; the agent runs on */
            } else if (n > 0) {
                put(&pending, buf, (size_t)n);
                queued += (uint64_t)n;
                long long t = now_ns();
                if (t - last_input_event >= INPUT_EVENT_NS) {
                    last_input_event = t;
                    emit('I', (uint64_t)n);
                }
                flush_pending();
            }
        }
        if (i_ctl >= 0 && pf[i_ctl].revents) {
            int n = read_fd(ctl_fd, buf, sizeof buf);
            if (n == 0) {
                lose_supervisor();
            } else if (n > 0) {
                put(&ctl, buf, (size_t)n);
                take_control();
                flush_pending();
            }
        }
    }
    if (in_gap && tee_fd >= 0) {
        /* The final screen must reach the supervisor: give it up to 2 s to
         * make room for the tail instead of hoping the pipe has some. */
        struct pollfd pf = {tee_fd, POLLOUT, 0};
        poll(&pf, 1, 2000);
        flush_gap();
        while (in_gap && tee_fd >= 0 && poll(&pf, 1, 2000) > 0) flush_gap();
    }
    emit('E', 0);
    return 0;
}
