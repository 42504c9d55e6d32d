// Strict JSON for the report tests: the subcommands' --json must parse with
// any consumer, so it goes through nlohmann-json's RFC 8259 parser (no NaN, no
// trailing commas, no text after the value; it throws
// nlohmann::json::parse_error naming the byte), plus one check it does not
// make: an object with the same key twice is rejected (consumers disagree on
// which value wins). Objects keep their members in order (ordered_json), so
// tests can check the key order the docs show. Read values with .at(), which
// throws on a missing key or index (operator[] on a const value does not).
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace stallprof::testing {

using Json = nlohmann::ordered_json;

// Parses `text` (one JSON value, whitespace around it allowed) or throws
// Json::parse_error.
inline Json ParseJson(std::string_view text) {
  std::vector<std::set<std::string>> keys_of_open_objects;
  auto reject_duplicate_keys = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) keys_of_open_objects.emplace_back();
    if (event == Json::parse_event_t::object_end) keys_of_open_objects.pop_back();
    if (event == Json::parse_event_t::key && !keys_of_open_objects.back().insert(parsed.get<std::string>()).second)
      throw Json::parse_error::create(101, 0, "duplicate key '" + parsed.get<std::string>() + "'", &parsed);
    return true;
  };
  return Json::parse(text, reject_duplicate_keys);
}

// An object's keys in order.
inline std::vector<std::string> Keys(const Json& object) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.push_back(key);
  return keys;
}

}  // namespace stallprof::testing
