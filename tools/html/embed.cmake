# Turns the page of `gpuwatch report --format html` into a C++ header, so that
# the page stays a plain HTML file to edit and the binary needs no data files.
# Each <script src="NAME.js"></script> of the page is replaced by the script
# itself (NAME.js beside the page), so that nothing is fetched.
#   cmake -DIN=report.html -DOUT=report_html.h -P embed.cmake
file(READ "${IN}" content)
get_filename_component(dir "${IN}" DIRECTORY)
string(REGEX MATCHALL "<script src=\"[a-z_]+\\.js\"></script>" tags "${content}")
foreach(tag IN LISTS tags)
  string(REGEX REPLACE "<script src=\"([a-z_]+\\.js)\"></script>" "\\1" name "${tag}")
  file(READ "${dir}/${name}" script)
  string(REPLACE "${tag}" "<script>\n${script}</script>" content "${content}")
endforeach()
string(FIND "${content}" ")gwhtml\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string delimiter )gwhtml\"")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from tools/html/report.html and its scripts by tools/html/embed.cmake: edit those.\n"
  "#ifndef GPUWATCH_TOOLS_REPORT_HTML_H_\n"
  "#define GPUWATCH_TOOLS_REPORT_HTML_H_\n"
  "namespace gpuwatch::tools {\n"
  "inline constexpr char kReportHtmlTemplate[] = R\"gwhtml(${content})gwhtml\";\n"
  "}  // namespace gpuwatch::tools\n"
  "#endif  // GPUWATCH_TOOLS_REPORT_HTML_H_\n")
file(RENAME "${OUT}.tmp" "${OUT}")
