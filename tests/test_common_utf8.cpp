#include <catch2/catch.hpp>

#include "common/utf8.h"

using stallprof::ValidUtf8;

TEST_CASE("valid UTF-8 comes back unchanged") {
  CHECK(ValidUtf8("dataloader.fetch") == "dataloader.fetch");
  CHECK(ValidUtf8("d\xC3\xA9""code \xE2\x82\xAC \xF0\x9F\x98\x80") == "d\xC3\xA9""code \xE2\x82\xAC \xF0\x9F\x98\x80");
  CHECK(ValidUtf8("") == "");
}

TEST_CASE("invalid bytes become U+FFFD one for one") {
  CHECK(ValidUtf8("a\xFF" "b") == "a\xEF\xBF\xBD" "b");
  CHECK(ValidUtf8("\xC3") == "\xEF\xBF\xBD");                              // truncated sequence
  CHECK(ValidUtf8("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");               // overlong
  CHECK(ValidUtf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  CHECK(ValidUtf8("\xF4\x90\x80\x80").find("\xF4") == std::string::npos);  // above U+10FFFF
}
