// Duplicate keys in JSON text (json_keys.hpp): one pass of nlohmann's SAX
// parser, a set of keys per open object, nothing built.
#include "rpsim/io/json_keys.hpp"

#include <nlohmann/json.hpp>
#include <set>
#include <vector>

namespace rpsim::io {

namespace {

using json = nlohmann::json;

class FirstDuplicate : public nlohmann::json_sax<json> {
 public:
  std::string found;  // the duplicate's path

  bool null() override { return element(); }
  bool boolean(bool) override { return element(); }
  bool number_integer(number_integer_t) override { return element(); }
  bool number_unsigned(number_unsigned_t) override { return element(); }
  bool number_float(number_float_t, const string_t&) override { return element(); }
  bool string(string_t&) override { return element(); }
  bool binary(binary_t&) override { return element(); }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& f = open_.back();
    if (!f.keys.insert(k).second) {
      found = f.path.empty() ? k : f.path + "." + k;
      return false;  // stops the parse
    }
    f.key = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  struct Frame {
    bool object = false;
    std::string path, key;  // key: an object's latest; index: an array's next element
    std::set<std::string> keys;
    std::size_t index = 0;
  };
  std::vector<Frame> open_;

  // The path of the value about to start.
  std::string child() const {
    if (open_.empty()) return "";
    const Frame& f = open_.back();
    if (!f.object) return f.path + "[" + std::to_string(f.index) + "]";
    return f.path.empty() ? f.key : f.path + "." + f.key;
  }
  bool element() {
    if (!open_.empty() && !open_.back().object) ++open_.back().index;
    return true;
  }
  bool open(bool object) {
    Frame f;
    f.object = object;
    f.path = child();
    open_.push_back(std::move(f));
    return true;
  }
  bool close() {
    open_.pop_back();
    return element();
  }
};

}  // namespace

std::string duplicate_json_key(const std::string& text) {
  FirstDuplicate sax;
  json::sax_parse(text, &sax);
  return sax.found;
}

std::string duplicate_json_key_message(const std::string& key) {
  return "\"" + key + "\" is given twice in one object (a JSON reader keeps only the last): keep one";
}

}  // namespace rpsim::io
