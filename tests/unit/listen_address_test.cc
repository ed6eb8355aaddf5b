// `gpuwatch exporter --listen` as users type it (tools/commands/listen_address.h).
#include "tools/commands/listen_address.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuwatch::tools {
namespace {

using Family = ListenAddress::Family;

struct Form {
  std::string value;
  Family family;
  std::string host;  // numeric
  int port;
  std::string shown;
};

// Each form: the address it reads as, and how the exporter's line shows it.
TEST(ListenAddress, EachFormReadsAsItsAddress) {
  const std::vector<Form> forms = {
      // every address: IPv6 and IPv4 on one socket
      {":9468", Family::kAny, "::", 9468, "[::]"},
      {"0.0.0.0:9468", Family::kIpv4, "0.0.0.0", 9468, "0.0.0.0"},
      {"127.0.0.1:0", Family::kIpv4, "127.0.0.1", 0, "127.0.0.1"},
      {"10.1.2.3:65535", Family::kIpv4, "10.1.2.3", 65535, "10.1.2.3"},
      {"[::]:9468", Family::kIpv6, "::", 9468, "[::]"},
      {"[::1]:9468", Family::kIpv6, "::1", 9468, "[::1]"},
      {"[fd00::2]:1", Family::kIpv6, "fd00::2", 1, "[fd00::2]"},
      // a name: resolved, IPv4 first, shown as typed
      {"localhost:9468", Family::kIpv4, "127.0.0.1", 9468, "localhost"},
  };
  for (const Form& form : forms) {
    ListenAddress a;
    std::string problem;
    ASSERT_TRUE(ParseListenAddress(form.value, &a, &problem)) << form.value << ": " << problem;
    EXPECT_EQ(a.family, form.family) << form.value;
    EXPECT_EQ(a.host, form.host) << form.value;
    EXPECT_EQ(a.port, form.port) << form.value;
    EXPECT_EQ(a.shown, form.shown) << form.value;
  }
}

TEST(ListenAddress, Ipv4AddressesGoToTheHttpServerAsTheyAre) {
  ListenAddress a;
  std::string problem;
  ASSERT_TRUE(ParseListenAddress("0.0.0.0:9468", &a, &problem));
  EXPECT_EQ(CivetwebPorts(a), "0.0.0.0:9468");
}

// Each bad value is one line saying what to write instead.
TEST(ListenAddress, EachBadValueIsOneLineSayingWhatToWrite) {
  const std::string no_port = "no port (expected HOST:PORT or :PORT, e.g. 127.0.0.1:9468)";
  const std::string bad_port = "the port is not a number from 0 to 65535";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"9468",
       "a port alone: write :9468 for every address or 127.0.0.1:9468 for this machine only"},
      {"127.0.0.1", no_port},
      {"", no_port},
      {"127.0.0.1:", bad_port},
      {"127.0.0.1:http", bad_port},
      {"127.0.0.1:65536", bad_port},
      {"127.0.0.1:-1", bad_port},
      {":", bad_port},
      {"::1:9468", "an IPv6 address goes in brackets: [::1]:9468"},
      {"[::1:9468", "no closing bracket around the IPv6 address (e.g. [::1]:9468)"},
      {"[]:9468", "not an IPv6 address in the brackets: "},
      {"[127.0.0.1]:9468", "not an IPv6 address in the brackets: 127.0.0.1"},
  };
  for (const auto& [value, expected] : cases) {
    ListenAddress a;
    std::string problem;
    EXPECT_FALSE(ParseListenAddress(value, &a, &problem)) << value;
    EXPECT_EQ(problem, expected) << value;
  }
  ListenAddress a;
  std::string problem;
  EXPECT_FALSE(ParseListenAddress("no-such-host.invalid:9468", &a, &problem));
  EXPECT_EQ(problem.rfind("cannot resolve the host: ", 0), 0u) << problem;
}

}  // namespace
}  // namespace gpuwatch::tools
