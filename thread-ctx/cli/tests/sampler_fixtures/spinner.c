/* CPU-burning test writer for the eBPF sampler tests (not shipped).
 *
 * Three threads spin in spin() until killed:
 *   sp-valid    publishes a valid record (known ids, flags 01, attrs key 0 "/spin/ok")
 *   sp-cleared  publishes a record with valid = 0
 *   sp-null     never sets otel_thread_ctx_v1 (NULL, or no TLS block at all)
 * otel_thread_ctx_v1 comes from tests/fixtures/ctx_record.c, either linked in or
 * dlopen'ed (--dlopen PATH), so the access model is the build's choice.
 *
 * Prints "pid P", one "thread TID NAME TRACE SPAN FLAGS RECORD SPIN_ADDR" line
 * per spinning thread (ids zero for sp-null), then "ready". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { VALID, CLEARED, NULLREC, THREADS };
static const char *names[THREADS] = { "sp-valid", "sp-cleared", "sp-null" };
static void (*set_record)(void *);
static pthread_barrier_t started;
static pid_t tids[THREADS];
static uint8_t *records[THREADS];

__attribute__((noinline)) void spin(volatile unsigned long *counter) {
    for (;;) (*counter)++;
}

static uint8_t *build_record(int valid) {
    uint8_t *r = aligned_alloc(64, 640);
    if (!r) { perror("aligned_alloc"); exit(100); }
    memset(r, 0, 640);
    for (int i = 0; i < 16; i++) r[i] = (uint8_t)(0x40 + i);
    for (int i = 0; i < 8; i++) r[16 + i] = (uint8_t)(0xc0 + i);
    static const char route[] = "/spin/ok";
    r[28] = 0;
    r[29] = (uint8_t)(sizeof route - 1);
    memcpy(r + 30, route, sizeof route - 1);
    uint16_t size = (uint16_t)(2 + sizeof route - 1);
    memcpy(r + 26, &size, 2);
    r[25] = 1;
    r[24] = (uint8_t)valid;
    return r;
}

static void *worker(void *arg) {
    int idx = (int)(intptr_t)arg;
    volatile unsigned long counter = 0;
    pthread_setname_np(pthread_self(), names[idx]);
    tids[idx] = (pid_t)syscall(SYS_gettid);
    if (idx != NULLREC) {
        records[idx] = build_record(idx == VALID);
        set_record(records[idx]);
    }
    pthread_barrier_wait(&started);
    spin(&counter);
    return NULL;
}

int main(int argc, char **argv) {
    void *handle = RTLD_DEFAULT;
    if (argc == 3 && !strcmp(argv[1], "--dlopen")) {
        handle = dlopen(argv[2], RTLD_NOW);
        if (!handle) { fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror()); return 3; }
    } else if (argc != 1) {
        fprintf(stderr, "usage: spinner [--dlopen LIB]\n");
        return 2;
    }
    set_record = (void (*)(void *))dlsym(handle, "fixture_set_record");
    if (!set_record) { fprintf(stderr, "dlsym fixture_set_record: %s\n", dlerror()); return 3; }
    pthread_barrier_init(&started, NULL, THREADS + 1);
    pthread_t t;
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t, NULL, worker, (void *)(intptr_t)i)) { perror("pthread_create"); return 100; }
    pthread_barrier_wait(&started);
    printf("pid %d\n", (int)getpid());
    for (int i = 0; i < THREADS; i++) {
        static const uint8_t zero[640];
        const uint8_t *r = records[i] ? records[i] : zero;
        printf("thread %d %s ", (int)tids[i], names[i]);
        for (int b = 0; b < 16; b++) printf("%02x", r[b]);
        printf(" ");
        for (int b = 16; b < 24; b++) printf("%02x", r[b]);
        printf(" %02x %p %p\n", r[25], (void *)records[i], (void *)spin);
    }
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
