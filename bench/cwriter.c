/* A publisher in C for bench/cbench.py: W threads, each with its own connection, sending
 * PUB (batch 1) or MPUB (batch N) of SIZE-byte bodies and waiting for each OK before the
 * next, for SECONDS. The load generator costs next to nothing, so what is measured is the
 * server (a Python generator tops out near 22k round trips/s against a server that does
 * nothing). Prints one JSON line: messages, seconds, round trips, p50/p99/p99.9/max round
 * trip in us.
 *
 * With RATE (msgs/s in all), each connection instead sends its PUBs when they are due, at
 * RATE/WORKERS, without waiting for the previous OK; a reader thread per connection takes
 * the OKs (in order) and a PUB's latency runs from its send to its OK. This is latency
 * under a fixed load: waiting for each OK would cap the rate at one per round trip and
 * leave out the PUBs that a slow answer delayed.
 *
 * usage: cwriter HOST PORT TOPIC SIZE BATCH SECONDS WORKERS [RATE]
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES 4000000

static const char *host, *topic;
static int port, size, batch, workers;
static double seconds, rate;

struct worker {
    pthread_t thread;
    long messages, round_trips, samples;
    uint32_t *latency_us;
    int failed;
    /* paced mode: the writer publishes send times and a count, the reader consumes them */
    int fd;
    double *sent_at;
    long sent;
    int writer_done;
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n <= 0) return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_all(int fd, char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = read(fd, buf, len);
        if (n <= 0) return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads frames until a response that is not a heartbeat; 0 for OK, -1 otherwise. */
static int await_ok(int fd, char *frame, size_t cap) {
    for (;;) {
        uint32_t be[2];
        if (read_all(fd, (char *)be, 8) < 0) return -1;
        uint32_t length = ntohl(be[0]), type = ntohl(be[1]);
        if (length < 4 || length - 4 > cap) return -1;
        if (read_all(fd, frame, length - 4) < 0) return -1;
        if (type != 0) return -1; /* an error frame, or a message we did not ask for */
        if (length - 4 == 11 && memcmp(frame, "_heartbeat_", 11) == 0) {
            if (write_all(fd, "NOP\n", 4) < 0) return -1;
            continue;
        }
        return (length - 4 == 2 && memcmp(frame, "OK", 2) == 0) ? 0 : -1;
    }
}

static size_t build_command(char *out) {
    size_t n;
    if (batch == 1) {
        n = (size_t)sprintf(out, "PUB %s\n", topic);
        uint32_t len = htonl((uint32_t)size);
        memcpy(out + n, &len, 4);
        n += 4;
        memset(out + n, 'x', (size_t)size);
        return n + (size_t)size;
    }
    n = (size_t)sprintf(out, "MPUB %s\n", topic);
    uint32_t total = htonl((uint32_t)(4 + batch * (4 + size))), count = htonl((uint32_t)batch);
    memcpy(out + n, &total, 4);
    memcpy(out + n + 4, &count, 4);
    n += 8;
    for (int i = 0; i < batch; i++) {
        uint32_t len = htonl((uint32_t)size);
        memcpy(out + n, &len, 4);
        memset(out + n + 4, 'x', (size_t)size);
        n += 4 + (size_t)size;
    }
    return n;
}

static int open_connection(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &addr.sin_addr);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || write_all(fd, "  V2", 4) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void *take_oks(void *arg) {
    struct worker *w = arg;
    char *frame = malloc(1 << 16);
    for (long i = 0;; i++) {
        if (await_ok(w->fd, frame, 1 << 16) < 0) {
            /* the end: the writer half-closed after its last PUB and every PUB was answered */
            if (!__atomic_load_n(&w->writer_done, __ATOMIC_ACQUIRE) || i < __atomic_load_n(&w->sent, __ATOMIC_ACQUIRE))
                __atomic_store_n(&w->failed, 1, __ATOMIC_RELEASE);
            break;
        }
        double sent_at = w->sent_at[i]; /* written before the PUB left, so before its OK came */
        if (w->samples < MAX_SAMPLES) w->latency_us[w->samples++] = (uint32_t)((now() - sent_at) * 1e6);
        w->round_trips++;
        w->messages += batch;
    }
    free(frame);
    return NULL;
}

static void *publish_paced(struct worker *w) {
    double interval = workers / rate, start = now() + 0.01, end = start + seconds;
    long capacity = (long)(seconds * rate / workers) + 16;
    w->sent_at = malloc(sizeof(double) * (size_t)capacity);
    char *command = malloc(256 + (size_t)size);
    size_t length = build_command(command);
    pthread_t reader;
    pthread_create(&reader, NULL, take_oks, w);
    for (long i = 0; i < capacity; i++) {
        double due = start + i * interval;
        if (due >= end || __atomic_load_n(&w->failed, __ATOMIC_ACQUIRE)) break;
        double wait = due - now();
        if (wait > 0) {
            struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
            nanosleep(&ts, NULL);
        }
        w->sent_at[i] = now();
        __atomic_store_n(&w->sent, i + 1, __ATOMIC_RELEASE);
        if (write_all(w->fd, command, length) < 0) {
            __atomic_store_n(&w->failed, 1, __ATOMIC_RELEASE);
            break;
        }
    }
    __atomic_store_n(&w->writer_done, 1, __ATOMIC_RELEASE);
    shutdown(w->fd, SHUT_WR);
    pthread_join(reader, NULL);
    close(w->fd);
    free(command);
    free(w->sent_at);
    return NULL;
}

static void *publish(void *arg) {
    struct worker *w = arg;
    int fd = open_connection();
    if (fd < 0) {
        w->failed = 1;
        return NULL;
    }
    if (rate > 0) {
        w->fd = fd;
        return publish_paced(w);
    }
    size_t cap = 256 + (size_t)batch * (4 + (size_t)size);
    char *command = malloc(cap), *frame = malloc(1 << 16);
    size_t length = build_command(command);
    double end = now() + seconds;
    while (now() < end) {
        double t0 = now();
        if (write_all(fd, command, length) < 0 || await_ok(fd, frame, 1 << 16) < 0) {
            w->failed = 1;
            break;
        }
        if (w->samples < MAX_SAMPLES) w->latency_us[w->samples++] = (uint32_t)((now() - t0) * 1e6);
        w->round_trips++;
        w->messages += batch;
    }
    close(fd);
    free(command);
    free(frame);
    return NULL;
}

static int by_value(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 8 && argc != 9) {
        fprintf(stderr, "usage: %s HOST PORT TOPIC SIZE BATCH SECONDS WORKERS [RATE]\n", argv[0]);
        return 2;
    }
    host = argv[1];
    port = atoi(argv[2]);
    topic = argv[3];
    size = atoi(argv[4]);
    batch = atoi(argv[5]);
    seconds = atof(argv[6]);
    workers = atoi(argv[7]);
    rate = argc == 9 ? atof(argv[8]) : 0;
    if (port <= 0 || size <= 0 || batch <= 0 || seconds <= 0 || workers <= 0 || strlen(topic) > 64 ||
        rate < 0 || (rate > 0 && batch != 1)) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); /* a closed connection is a failed write, reported as such */
    struct worker *ws = calloc((size_t)workers, sizeof *ws);
    double start = now();
    for (int i = 0; i < workers; i++) {
        ws[i].latency_us = malloc(sizeof(uint32_t) * MAX_SAMPLES);
        pthread_create(&ws[i].thread, NULL, publish, &ws[i]);
    }
    long messages = 0, round_trips = 0, samples = 0;
    int failed = 0;
    for (int i = 0; i < workers; i++) {
        pthread_join(ws[i].thread, NULL);
        messages += ws[i].messages;
        round_trips += ws[i].round_trips;
        samples += ws[i].samples;
        failed |= ws[i].failed;
    }
    double elapsed = now() - start;
    uint32_t *all = malloc(sizeof(uint32_t) * (size_t)(samples ? samples : 1));
    long k = 0;
    for (int i = 0; i < workers; i++)
        for (long j = 0; j < ws[i].samples; j++) all[k++] = ws[i].latency_us[j];
    qsort(all, (size_t)samples, sizeof(uint32_t), by_value);
    uint32_t p50 = samples ? all[samples / 2] : 0, p99 = samples ? all[(long)(samples * 0.99)] : 0;
    uint32_t p999 = samples ? all[(long)(samples * 0.999)] : 0, max = samples ? all[samples - 1] : 0;
    printf("{\"messages\": %ld, \"seconds\": %.3f, \"round_trips\": %ld, \"p50_us\": %u, \"p99_us\": %u, "
           "\"p999_us\": %u, \"max_us\": %u, \"failed\": %s}\n", messages, elapsed, round_trips, p50, p99, p999,
           max, failed ? "true" : "false");
    return failed ? 1 : 0;
}
