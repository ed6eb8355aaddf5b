// `gpuwatch report --format pprof`: a report as a pprof profile
// (perftools.profiles.Profile of tools/pprof/profile.proto, gzipped), which
// `pprof` and other profile viewers open.
//
// One sample per allocation site, its stack as locations (function, file,
// line; inlined frames folded into the location of the function they were
// inlined into; a mapping per module), with four values:
//   live_space/bytes, live_objects/count: what leaks.device and leaks.host
//     hold at the site (device and pinned host memory together);
//   alloc_space/bytes, alloc_objects/count: the site's alloc_bytes and
//     allocs in `sites`.
// A site listed in only one of them has 0 for the other figures. The bytes
// and allocations of the sites a leaks section omitted (beyond its site
// limit) form one more sample, "[omitted sites]", so the live figures add up
// to the report's.
#ifndef GPUWATCH_TOOLS_FORMATS_PPROF_FORMAT_H_
#define GPUWATCH_TOOLS_FORMATS_PPROF_FORMAT_H_

#include <string>

#include "tools/reading/report_reader.h"

namespace gpuwatch::tools {

// The serialized profile of a report (its sites with their `frames`:
// ReadReport's model), not compressed.
std::string PprofProfile(const ReportModel& m);

// gzip (RFC 1952) of `data`; false only when zlib fails (out of memory).
bool Gzip(const std::string& data, std::string* out);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_FORMATS_PPROF_FORMAT_H_
