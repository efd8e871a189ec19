#include "span_record.h"

#include <v8-version.h>

#include <atomic>
#include <string.h>

namespace otel_v8 {
namespace {

// The string's characters as bytes, when it is exactly `n` characters all below 256 (anything
// else is not hex anyway). `chars` holds at least n.
bool ReadChars(v8::Isolate* isolate, v8::Local<v8::Value> value, int n, uint8_t* chars) {
  if (!value->IsString()) return false;
  v8::Local<v8::String> s = value.As<v8::String>();
  if (s->Length() != n) return false;
  if (s->IsOneByte()) {
#if V8_MAJOR_VERSION >= 13
    s->WriteOneByteV2(isolate, 0, n, chars);
#else
    s->WriteOneByte(isolate, chars, 0, n, v8::String::NO_NULL_TERMINATION);
#endif
    return true;
  }
  // Two-byte storage (rare: a string built from two-byte pieces): checked character by character.
  uint16_t wide[32];
#if V8_MAJOR_VERSION >= 13
  s->WriteV2(isolate, 0, n, wide);
#else
  s->Write(isolate, wide, 0, n, v8::String::NO_NULL_TERMINATION);
#endif
  for (int i = 0; i < n; i++) {
    if (wide[i] > 0xff) return false;
    chars[i] = static_cast<uint8_t>(wide[i]);
  }
  return true;
}

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the record's byte order is the character order");

constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kHigh = 0x8080808080808080ULL;

// Per byte of x: the high bit set when m < byte < n, for bytes below 0x80 (0 for any other byte):
// eight range checks in a few word operations, none of whose bytes carries into the next.
constexpr uint64_t Between(uint64_t x, uint64_t m, uint64_t n) {
  return (kOnes * (127 + n) - (x & kOnes * 127)) & ~x & ((x & kOnes * 127) + kOnes * (127 - m)) & kHigh;
}

// Eight hex digits (as read from memory, the first in the low byte) into four bytes, a word at a
// time: ~60 instructions against ~95 with a table lookup per digit (callgrind, span workload, Node
// 24). False when any of them is not 0-9, a-f or A-F.
bool DecodeWord(uint64_t x, uint32_t* out) {
  const uint64_t digit = Between(x, '0' - 1, '9' + 1);
  const uint64_t letter = Between(x | kOnes * 0x20, 'a' - 1, 'f' + 1);
  if ((digit | letter) != kHigh) return false;
  // A digit's value is its low nibble; a letter's (bit 6 set) its low nibble plus 9.
  const uint64_t nibbles = (x & kOnes * 0x0f) + 9 * ((x >> 6) & kOnes);
  uint64_t t = ((nibbles << 4) | (nibbles >> 8)) & 0x00ff00ff00ff00ffULL;  // bytes 0, 2, 4, 6
  t = (t | (t >> 8)) & 0x0000ffff0000ffffULL;
  *out = static_cast<uint32_t>(t | (t >> 16));
  return true;
}

// n hex digits (a multiple of 8) into n / 2 bytes; false on a non-hex digit or an all-zero id.
bool Decode(const uint8_t* chars, int n, uint8_t* out) {
  uint32_t any = 0;
  for (int i = 0; i < n; i += 8) {
    uint64_t x;
    uint32_t word;
    memcpy(&x, chars + i, sizeof(x));
    if (!DecodeWord(x, &word)) return false;
    memcpy(out + i / 2, &word, sizeof(word));
    any |= word;
  }
  return any != 0;
}

}  // namespace

bool WriteSpanRecord(v8::Isolate* isolate, v8::Local<v8::Value> trace_id, v8::Local<v8::Value> span_id, uint32_t control,
                     uint8_t* record) {
  uint8_t chars[32];
  uint8_t ids[24];
  if (!ReadChars(isolate, trace_id, 32, chars) || !Decode(chars, 32, ids)) return false;
  if (!ReadChars(isolate, span_id, 16, chars) || !Decode(chars, 16, ids + 16)) return false;
  memcpy(record, ids, sizeof(ids));
  // The ids before the control word, in program order for a reader interrupting this thread.
  std::atomic_signal_fence(std::memory_order_release);
  *reinterpret_cast<volatile uint32_t*>(record + kControlWordOffset) = control;
  return true;
}

}  // namespace otel_v8
