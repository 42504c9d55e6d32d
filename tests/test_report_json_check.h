// A strict JSON parser for the report tests: the subcommands' --json must
// parse with any consumer, so this one accepts RFC 8259 only (no NaN, no
// trailing commas, no trailing text) and throws std::runtime_error naming the
// offset otherwise. Objects keep their members in order.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stallprof::testing {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;

  bool IsNull() const { return type == Type::kNull; }
  bool Has(std::string_view key) const {
    for (const auto& [k, v] : object)
      if (k == key) return true;
    return false;
  }
  const JsonValue& operator[](std::string_view key) const {
    if (type != Type::kObject) throw std::runtime_error("not an object, no member '" + std::string(key) + "'");
    for (const auto& [k, v] : object)
      if (k == key) return v;
    throw std::runtime_error("no member '" + std::string(key) + "'");
  }
  const JsonValue& operator[](size_t i) const {
    if (type != Type::kArray || i >= array.size()) throw std::runtime_error("no element " + std::to_string(i));
    return array[i];
  }
  std::vector<std::string> Keys() const {
    std::vector<std::string> keys;
    for (const auto& [k, v] : object) keys.push_back(k);
    return keys;
  }
};

namespace json_detail {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  JsonValue Document() {
    JsonValue v = Value();
    Space();
    if (i_ != s_.size()) Fail("text after the value");
    return v;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at offset " + std::to_string(i_));
  }
  void Space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool Take(char c) {
    Space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void Expect(char c) {
    if (!Take(c)) Fail(std::string("expected '") + c + "'");
  }
  bool Literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  JsonValue Value() {
    Space();
    if (i_ >= s_.size()) Fail("unexpected end");
    JsonValue v;
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.type = JsonValue::Type::kObject;
      if (Take('}')) return v;
      do {
        Space();
        std::string key = String();
        Expect(':');
        v.object.emplace_back(std::move(key), Value());
      } while (Take(','));
      Expect('}');
    } else if (c == '[') {
      ++i_;
      v.type = JsonValue::Type::kArray;
      if (Take(']')) return v;
      do v.array.push_back(Value());
      while (Take(','));
      Expect(']');
    } else if (c == '"') {
      v.type = JsonValue::Type::kString;
      v.string = String();
    } else if (Literal("true")) {
      v.type = JsonValue::Type::kBool;
      v.boolean = true;
    } else if (Literal("false")) {
      v.type = JsonValue::Type::kBool;
    } else if (Literal("null")) {
      v.type = JsonValue::Type::kNull;
    } else {
      v.type = JsonValue::Type::kNumber;
      v.number = Number();
    }
    return v;
  }

  std::string String() {
    if (i_ >= s_.size() || s_[i_] != '"') Fail("expected a string");
    ++i_;
    std::string out;
    while (true) {
      if (i_ >= s_.size()) Fail("unterminated string");
      const auto c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return out;
      if (c < 0x20) Fail("control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (i_ >= s_.size()) Fail("unterminated escape");
      switch (s_[i_++]) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) Fail("short \\u escape");
          const std::string hex(s_.substr(i_, 4));
          char* end = nullptr;
          const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
          if (end != hex.c_str() + 4) Fail("bad \\u escape");
          i_ += 4;
          if (cp < 0x80) {  // UTF-8 of the code point (the tests need no surrogate pairs)
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          }
          break;
        }
        default: Fail("unknown escape");
      }
    }
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  double Number() {
    const size_t start = i_;
    auto digits = [&] {
      const size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ - from;
    };
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else if (digits() == 0) {
      Fail("expected a value");
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (digits() == 0) Fail("no digits after '.'");
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (digits() == 0) Fail("no digits in the exponent");
    }
    return std::strtod(std::string(s_.substr(start, i_ - start)).c_str(), nullptr);
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace json_detail

// Parses `text` (one JSON value, whitespace around it allowed) or throws.
inline JsonValue ParseJson(std::string_view text) { return json_detail::Parser(text).Document(); }

}  // namespace stallprof::testing
