// A minimal streaming JSON writer: appends to a std::string, tracks commas,
// escapes strings (control characters, quotes, backslashes; invalid UTF-8
// bytes become U+FFFD so the output always parses).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

namespace stallprof::report {

// Appends `text` as a quoted JSON string.
void AppendJsonString(std::string& out, std::string_view text);

// How a JsonWriter lays out what it writes. The default is compact with
// numbers that round-trip (analyze's schema); whatif and recommend print
// ", " and ": " between items and numbers to 6 significant digits.
struct JsonStyle {
  bool spaced = false;         // ", " and ": " instead of "," and ":"
  int significant_digits = 0;  // 0: the shortest text that round-trips; else {:.<n>g}
};

// 6 significant digits, ", " and ": ": the --json of whatif and recommend.
inline constexpr JsonStyle kSpacedJson{true, 6};

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out, JsonStyle style = {}) : out_(out), style_(style) {}
  JsonWriter& BeginObject() { Separate(); out_ += '{'; first_ = true; return *this; }
  JsonWriter& EndObject() { out_ += '}'; first_ = false; return *this; }
  JsonWriter& BeginArray() { Separate(); out_ += '['; first_ = true; return *this; }
  JsonWriter& EndArray() { out_ += ']'; first_ = false; return *this; }
  JsonWriter& Key(std::string_view key) {
    Separate();
    AppendJsonString(out_, key);
    out_ += style_.spaced ? ": " : ":";
    after_key_ = true;
    return *this;
  }
  JsonWriter& String(std::string_view v) { Separate(); AppendJsonString(out_, v); return *this; }
  JsonWriter& Bool(bool v) { Separate(); out_ += v ? "true" : "false"; return *this; }
  JsonWriter& Null() { Separate(); out_ += "null"; return *this; }
  JsonWriter& Int(int64_t v) { Separate(); out_ += std::to_string(v); return *this; }
  JsonWriter& Uint(uint64_t v) { Separate(); out_ += std::to_string(v); return *this; }
  // Non-finite numbers become null (JSON has no NaN/Inf).
  JsonWriter& Number(double v);

  template <typename T>
  JsonWriter& Field(std::string_view key, T v) {
    Key(key);
    if constexpr (std::is_same_v<T, bool>) return Bool(v);
    else if constexpr (std::is_floating_point_v<T>) return Number(v);
    else if constexpr (std::is_signed_v<T> && std::is_integral_v<T>) return Int(v);
    else if constexpr (std::is_integral_v<T>) return Uint(v);
    else return String(v);
  }

 private:
  void Separate() {
    if (after_key_) { after_key_ = false; return; }
    if (!first_) out_ += style_.spaced ? ", " : ",";
    first_ = false;
  }
  std::string& out_;
  JsonStyle style_;
  bool first_ = true;
  bool after_key_ = false;
};

}  // namespace stallprof::report
