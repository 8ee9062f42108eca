/* A publisher in C for bench/cbench.py: W threads, each with its own connection, sending
 * PUB (batch 1) or MPUB (batch N) of SIZE-byte bodies and waiting for each OK before the
 * next, for SECONDS. The load generator costs next to nothing, so what is measured is the
 * server (a Python generator tops out near 22k round trips/s against a server that does
 * nothing). Prints one JSON line: messages, seconds, round trips, p50/p99 round trip in us.
 *
 * usage: cwriter HOST PORT TOPIC SIZE BATCH SECONDS WORKERS
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
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
static double seconds;

struct worker {
    pthread_t thread;
    long messages, round_trips, samples;
    uint32_t *latency_us;
    int failed;
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

static void *publish(void *arg) {
    struct worker *w = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &addr.sin_addr);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || write_all(fd, "  V2", 4) < 0) {
        w->failed = 1;
        return NULL;
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
    if (argc != 8) {
        fprintf(stderr, "usage: %s HOST PORT TOPIC SIZE BATCH SECONDS WORKERS\n", argv[0]);
        return 2;
    }
    host = argv[1];
    port = atoi(argv[2]);
    topic = argv[3];
    size = atoi(argv[4]);
    batch = atoi(argv[5]);
    seconds = atof(argv[6]);
    workers = atoi(argv[7]);
    if (port <= 0 || size <= 0 || batch <= 0 || seconds <= 0 || workers <= 0 || strlen(topic) > 64) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
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
    printf("{\"messages\": %ld, \"seconds\": %.3f, \"round_trips\": %ld, \"p50_us\": %u, \"p99_us\": %u, "
           "\"failed\": %s}\n", messages, elapsed, round_trips, p50, p99, failed ? "true" : "false");
    return failed ? 1 : 0;
}
