#include "tools/cli/man_page.h"

#include <cctype>
#include <cstdio>

namespace gpuwatch::tools {

namespace {

// Decodes one UTF-8 sequence at text[*i] (advancing *i past it); 0xFFFD when
// it is malformed.
unsigned DecodeUtf8(const std::string& text, size_t* i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned first = byte(*i);
  const int extra = first >= 0xF0 ? 3 : first >= 0xE0 ? 2 : first >= 0xC0 ? 1 : -1;
  if (extra < 0 || *i + extra >= text.size()) {
    ++*i;
    return 0xFFFD;
  }
  unsigned code = first & (0x3F >> extra);
  for (int k = 1; k <= extra; ++k) code = (code << 6) | (byte(*i + k) & 0x3F);
  *i += extra + 1;
  return code;
}

// Text as roff prints it: backslashes escaped, '-' as a minus (option names
// are typed as shown), anything beyond ASCII as a \[uXXXX] glyph.
std::string Esc(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      char glyph[16];
      std::snprintf(glyph, sizeof(glyph), "\\[u%04X]", DecodeUtf8(text, &i));
      out += glyph;
      continue;
    }
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    ++i;
  }
  return out;
}

std::string Bold(const std::string& text) { return "\\fB" + Esc(text) + "\\fR"; }
std::string Italic(const std::string& text) { return "\\fI" + Esc(text) + "\\fR"; }

// A line of text: one that would start with '.' or '\'' is a request in roff.
std::string Line(const std::string& roff) {
  if (!roff.empty() && (roff[0] == '.' || roff[0] == '\'')) return "\\&" + roff + "\n";
  return roff + "\n";
}

// Markdown as roff: `code` bold, **strong** bold, [text](link) as its text.
std::string FromMarkdown(const std::string& md) {
  std::string out;
  std::string plain;
  const auto flush = [&]() {
    out += Esc(plain);
    plain.clear();
  };
  for (size_t i = 0; i < md.size(); ++i) {
    if (md[i] == '\\' && i + 1 < md.size() && md[i + 1] == '|') {
      plain += '|';
      ++i;
    } else if (md[i] == '`') {
      const size_t end = md.find('`', i + 1);
      if (end == std::string::npos) {
        plain += md[i];
        continue;
      }
      flush();
      out += Bold(md.substr(i + 1, end - i - 1));
      i = end;
    } else if (md.compare(i, 2, "**") == 0 && md.find("**", i + 2) != std::string::npos) {
      const size_t end = md.find("**", i + 2);
      flush();
      out += "\\fB" + FromMarkdown(md.substr(i + 2, end - i - 2)) + "\\fR";
      i = end + 1;
    } else if (md[i] == '[' && md.find("](", i) != std::string::npos &&
               md.find(')', md.find("](", i)) != std::string::npos &&
               md.find(']', i) == md.find("](", i)) {
      const size_t close = md.find("](", i);
      flush();
      out += FromMarkdown(md.substr(i + 1, close - i - 1));
      i = md.find(')', close);
    } else {
      plain += md[i];
    }
  }
  flush();
  return out;
}

std::string Sentence(const std::string& text) {
  if (text.empty() || text.back() == '.') return text;
  return text + ".";
}

std::string Upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

bool IsHelp(const OptionDoc& o) {
  for (const std::string& n : o.names) {
    if (n == "--help" || n == "--version") return true;
  }
  return false;
}

// "-o, --output FILE" (or a positional's "FILE...") in roff.
std::string Usage(const OptionDoc& o, bool all_names) {
  if (!o.positional.empty()) {
    if (o.kind == ValueKind::kCommand)
      return "\\fB\\-\\-\\fR " + Italic("COMMAND") + " [" + Italic("ARGS") + "...]";
    return Italic(Upper(o.positional)) + (o.repeatable ? "..." : "");
  }
  std::string names;
  for (const std::string& n : o.names) {
    if (!all_names && n != o.names.back()) continue;
    names += (names.empty() ? "" : ", ") + Bold(n);
  }
  if (o.kind == ValueKind::kNone) return names;
  return names + " " +
         Italic(o.kind == ValueKind::kChoice ? Upper(o.names.back().substr(2)) : o.value);
}

std::string Synopsis(const CommandDoc& c, bool top) {
  std::string out = ".B " + Esc(top ? c.name : "gpuwatch " + c.name) + "\n";
  if (top)
    return out + Line(Italic("COMMAND") + " [" + Italic("OPTIONS") + "]") + ".br\n.B gpuwatch\n" +
           Line("\\fB\\-\\-version\\fR | \\fB\\-\\-help\\fR");
  std::string words;
  for (const OptionDoc& o : c.options) {
    if (IsHelp(o) || o.kind == ValueKind::kCommand) continue;
    const std::string usage = Usage(o, false) + (o.repeatable && o.positional.empty() ? "..." : "");
    words += (words.empty() ? "" : " ") + (o.required ? usage : "[" + usage + "]");
  }
  for (const OptionDoc& o : c.options) {
    if (o.kind == ValueKind::kCommand) words += " " + Usage(o, false);
  }
  return out + Line(words);
}

std::string OptionText(const OptionDoc& o) {
  std::string text = Esc(Sentence(o.help));
  if (!o.choices.empty()) {
    std::string list;
    for (const std::string& c : o.choices) list += (list.empty() ? "" : ", ") + Bold(c);
    text += " One of " + list + ".";
  }
  if (!o.range.empty()) text += " From " + Esc(o.range) + ".";
  if (!o.default_value.empty()) text += " Default: " + Bold(o.default_value) + ".";
  if (o.repeatable && o.positional.empty()) text += " Repeatable.";
  for (const std::string& n : o.needs) text += " Only with " + Bold(n) + ".";
  for (const std::string& n : o.excludes) text += " Not with " + Bold(n) + ".";
  if (o.required && o.positional.empty()) text += " Required.";
  return text;
}

// The variables a subcommand's page lists: all for run (its command reads
// them), else those whose row names the subcommand or that its options name.
bool ReadBy(const std::vector<CommandDoc>& commands, size_t index, const EnvDoc& e) {
  if (index == 0 || commands[index].name == "run") return true;
  const std::string& name = commands[index].name;
  if (e.meaning.find("`" + name + "`") != std::string::npos ||
      e.meaning.find("`gpuwatch " + name + "`") != std::string::npos) {
    return true;
  }
  for (const OptionDoc& o : commands[index].options) {
    if (o.help.find(e.name) != std::string::npos) return true;
  }
  return false;
}

std::string Environment(const std::vector<CommandDoc>& commands, size_t index,
                        const std::vector<EnvDoc>& env) {
  std::string out = ".SH ENVIRONMENT\n";
  out += Line(index == 0 ? "gpuwatch reads these variables when it attaches to a process; the "
                           "command reads those that say so."
                         : "The variables " + Bold("gpuwatch " + commands[index].name) +
                               " reads or hands to what it runs; " + Bold("gpuwatch") +
                               "(1) lists them all.");
  for (const EnvDoc& e : env) {
    if (!ReadBy(commands, index, e)) continue;
    out += ".TP\n.B " + Esc(e.name) + "\n" + Line(FromMarkdown(e.meaning));
    out += Line("Default: " + FromMarkdown(e.default_value) + ".");
  }
  return out;
}

std::string SeeAlso(const std::vector<CommandDoc>& commands, size_t index) {
  std::string out = ".SH SEE ALSO\n";
  for (size_t i = 0; i < commands.size(); ++i) {
    if (i == index) continue;
    out += ".BR " + Esc(ManPageName(commands, i)) + " (1)" + (i + 1 < commands.size() ? "," : "") +
           "\n";
  }
  return out + Line("and the documentation in gpuwatch's " + Bold("docs/") +
                    " (cli.md, configuration.md, report-format.md).");
}

std::vector<std::string> Cells(const std::string& row) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] == '|' && row[i - 1] != '\\') {
      const size_t b = cell.find_first_not_of(' ');
      const size_t e = cell.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
      cell.clear();
    } else {
      cell += row[i];
    }
  }
  return cells;
}

}  // namespace

std::vector<EnvDoc> ReadEnvTable(const std::string& markdown) {
  std::vector<EnvDoc> rows;
  size_t start = 0;
  while (start < markdown.size()) {
    size_t end = markdown.find('\n', start);
    if (end == std::string::npos) end = markdown.size();
    const std::string line = markdown.substr(start, end - start);
    start = end + 1;
    if (line.compare(0, 3, "| `") != 0) {
      if (!rows.empty()) break;  // the end of the table
      continue;
    }
    const std::vector<std::string> cells = Cells(line);
    if (cells.size() < 3 || cells[0].size() < 3 || cells[0].back() != '`') continue;
    rows.push_back({cells[0].substr(1, cells[0].size() - 2), cells[1], cells[2]});
  }
  return rows;
}

std::string ManPageName(const std::vector<CommandDoc>& commands, size_t index) {
  return index == 0 ? commands[0].name : commands[0].name + "-" + commands[index].name;
}

std::string ManPage(const std::vector<CommandDoc>& commands, size_t index,
                    const std::vector<EnvDoc>& env, const std::string& version) {
  const CommandDoc& c = commands[index];
  const std::string page = ManPageName(commands, index);
  // "gpuwatch: GPU memory ..." (the top level's --help line) without its name.
  std::string description = c.description;
  if (description.rfind(c.name + ": ", 0) == 0) description.erase(0, c.name.size() + 2);
  std::string out =
      ".\\\" Generated by gpuwatch_docgen from the command's definition "
      "(tools/cli/cli_app.cc); do not edit.\n";
  out +=
      ".TH " + Esc(Upper(page)) + " 1 \"\" \"gpuwatch " + Esc(version) + "\" \"User Commands\"\n";
  out += ".SH NAME\n" + Line(Esc(page) + " \\- " + Esc(description));
  out += ".SH SYNOPSIS\n" + Synopsis(c, index == 0);
  out += ".SH DESCRIPTION\n" + Line(Esc(Sentence(description)));
  if (index == 0) {
    out += Line("Each command has its own page, " + Bold("gpuwatch-COMMAND") + "(1):");
    for (size_t i = 1; i < commands.size(); ++i) {
      out +=
          ".TP\n.B " + Esc(commands[i].name) + "\n" + Line(Esc(Sentence(commands[i].description)));
    }
  }
  out += ".SH OPTIONS\n";
  for (const OptionDoc& o : c.options) out += ".TP\n" + Line(Usage(o, true)) + Line(OptionText(o));
  if (!c.exit_status.empty()) {
    std::string status = c.exit_status;
    status[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(status[0])));
    out += ".SH EXIT STATUS\n" + Line(Esc(status));
  }
  out += Environment(commands, index, env);
  out += SeeAlso(commands, index);
  return out;
}

}  // namespace gpuwatch::tools
