/*
 * The one symbol every OTEP 4947 reader looks for.
 *
 * `otel_thread_ctx_v1` is a plain C thread-local pointer so that its access model is what the
 * compiler flags say (TLSDESC with -mtls-dialect=gnu2) and nothing Rust's std decides. It has
 * default visibility and is referenced through a TLSDESC relocation that names the symbol, which
 * is how readers classify the module. build.rs exports it in .dynsym with a version script.
 */
#include <stddef.h>

__attribute__((visibility("default"))) __thread void *otel_thread_ctx_v1 = NULL;

/* Per-thread addon state (not part of the ABI; hidden). One more 8-byte slot so the addon needs
 * no Rust thread_local!. */
static __thread void *otel_thread_ctx_state = NULL;

/* Address of this thread's slot: computed through the TLSDESC call sequence. */
void **otel_thread_ctx_slot(void) { return &otel_thread_ctx_v1; }

void **otel_thread_ctx_state_slot(void) { return &otel_thread_ctx_state; }

/* The resolved TLS descriptor {resolver, argument} the dynamic linker wrote for the symbol: the same
 * pair an out-of-process reader inspects. NULL where the architecture has no TLSDESC here. */
void *const *otel_thread_ctx_descriptor(void) {
#if defined(__x86_64__)
  void *const *desc;
  __asm__("leaq otel_thread_ctx_v1@tlsdesc(%%rip), %0" : "=r"(desc));
  return desc;
#else
  return NULL;
#endif
}

/* The thread pointer (x86-64: %fs base; glibc keeps a self pointer at %fs:0). */
void *otel_thread_ctx_thread_pointer(void) {
#if defined(__x86_64__)
  void *tp;
  __asm__("movq %%fs:0, %0" : "=r"(tp));
  return tp;
#elif defined(__aarch64__)
  void *tp;
  __asm__("mrs %0, tpidr_el0" : "=r"(tp));
  return tp;
#else
  return NULL;
#endif
}
