# Turns the page of `gpuwatch report --format html` into a C++ header, so that
# the page stays a plain HTML file to edit and the binary needs no data files.
#   cmake -DIN=report.html -DOUT=report_html.h -P embed.cmake
file(READ "${IN}" content)
string(FIND "${content}" ")gwhtml\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string delimiter )gwhtml\"")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from tools/html/report.html by tools/html/embed.cmake: edit those.\n"
  "#ifndef GPUWATCH_TOOLS_REPORT_HTML_H_\n"
  "#define GPUWATCH_TOOLS_REPORT_HTML_H_\n"
  "namespace gpuwatch::tools {\n"
  "inline constexpr char kReportHtmlTemplate[] = R\"gwhtml(${content})gwhtml\";\n"
  "}  // namespace gpuwatch::tools\n"
  "#endif  // GPUWATCH_TOOLS_REPORT_HTML_H_\n")
file(RENAME "${OUT}.tmp" "${OUT}")
