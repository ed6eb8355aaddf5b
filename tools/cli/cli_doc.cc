#include "tools/cli/cli_doc.h"

#include <regex>

namespace gpuwatch::tools {

namespace {

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == sep) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

std::vector<std::string> Names(const std::set<CLI::Option*>& options) {
  std::vector<std::string> names;
  for (const CLI::Option* o : options) names.push_back(o->get_name());
  return names;
}

// The option's type name without what its checks append (":{a,b}", ":INT in
// [0 - 128]"), and what those checks allow.
void ReadChecks(CLI::Option* opt, OptionDoc* doc) {
  std::string suffix;
  for (int i = 0;; ++i) {
    CLI::Validator* v = nullptr;
    try {
      v = opt->get_validator(i);
    } catch (const CLI::OptionNotFound&) {
      break;
    }
    const std::string desc = v->get_description();
    if (desc.empty()) continue;
    suffix += ":" + desc;
    static const std::regex kRange(R"(in \[(-?[0-9.]+) - (-?[0-9.]+)\])");
    std::smatch m;
    if (desc.size() > 2 && desc.front() == '{' && desc.back() == '}') {
      doc->choices = Split(desc.substr(1, desc.size() - 2), ',');
      doc->kind = ValueKind::kChoice;
    } else if (std::regex_search(desc, m, kRange)) {
      doc->range = m[1].str() + " to " + m[2].str();
    } else if (desc == "POSITIVE") {
      doc->range = "1 or more";
    }
  }
  std::string type = opt->get_type_name();
  if (!suffix.empty() && type.size() >= suffix.size() &&
      type.compare(type.size() - suffix.size(), suffix.size(), suffix) == 0) {
    type.resize(type.size() - suffix.size());
  }
  doc->value = type;
}

OptionDoc DescribeOption(CLI::Option* opt) {
  OptionDoc doc;
  for (const std::string& s : opt->get_snames()) doc.names.push_back("-" + s);
  for (const std::string& l : opt->get_lnames()) doc.names.push_back("--" + l);
  if (doc.names.empty()) doc.positional = opt->get_name(true);
  doc.help = opt->get_description();
  doc.default_value = opt->get_default_str();
  doc.required = opt->get_required();
  doc.needs = Names(opt->get_needs());
  doc.excludes = Names(opt->get_excludes());
  if (opt->get_items_expected_max() == 0) {
    doc.kind = ValueKind::kNone;
    return doc;
  }
  doc.repeatable = opt->get_items_expected_max() > 1 ||
                   opt->get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll;
  ReadChecks(opt, &doc);
  if (doc.kind != ValueKind::kChoice) {
    if (doc.value == "FILE") doc.kind = ValueKind::kFile;
    if (doc.value == "DIR") doc.kind = ValueKind::kDir;
    if (doc.value == "COMMAND") doc.kind = ValueKind::kCommand;
  }
  return doc;
}

CommandDoc DescribeCommand(CLI::App& app) {
  CommandDoc doc;
  doc.name = app.get_name();
  doc.description = app.get_description();
  const std::string footer = app.get_footer();
  const std::string prefix = "Exit status: ";
  if (footer.compare(0, prefix.size(), prefix) == 0) doc.exit_status = footer.substr(prefix.size());
  for (CLI::Option* opt : app.get_options()) doc.options.push_back(DescribeOption(opt));
  return doc;
}

}  // namespace

std::vector<CommandDoc> DescribeCli(CLI::App& app) {
  std::vector<CommandDoc> commands{DescribeCommand(app)};
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    commands.push_back(DescribeCommand(*sub));
  }
  return commands;
}

}  // namespace gpuwatch::tools
