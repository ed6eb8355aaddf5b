// Where `gpuwatch exporter --listen` serves: the value as users type it
// (`:9468`, `0.0.0.0:9468`, `[::]:9468`, `[::1]:9468`, `localhost:9468`)
// read into an address, and the listening socket for IPv6, which the HTTP
// server gets through a relay (tcp_relay.h): Debian's civetweb is built
// without IPv6. docs/prometheus.md describes the forms.
#ifndef GPUWATCH_TOOLS_COMMANDS_LISTEN_ADDRESS_H_
#define GPUWATCH_TOOLS_COMMANDS_LISTEN_ADDRESS_H_

#include <string>

namespace gpuwatch::tools {

struct ListenAddress {
  enum class Family {
    kIpv4,  // one IPv4 address (0.0.0.0: every one)
    kIpv6,  // one IPv6 address; `::` takes IPv4 as well where the system allows
    kAny,   // `:PORT`: every address, IPv6 and IPv4 (IPv4 alone without IPv6)
  };
  Family family = Family::kIpv4;
  std::string host;   // numeric: "127.0.0.1", "::1"; "::" for kAny
  int port = 0;       // 0: any free port
  std::string shown;  // the host as printed in a URL: "localhost", "[::1]"
};

// False with one line in *problem when `value` is not HOST:PORT or :PORT. A
// name is resolved, IPv4 first; an IPv6 address goes in brackets.
bool ParseListenAddress(const std::string& value, ListenAddress* out, std::string* problem);

// The HTTP server's own `listening_ports` value for an IPv4 address.
std::string CivetwebPorts(const ListenAddress& address);

// Why the HTTP server could not listen on an IPv4 address (it says only that
// it could not): the error of binding a socket there.
std::string Ipv4ListenProblem(const ListenAddress& address);

// A listening IPv6 socket for kIpv6 or kAny (dual-stack for `::`), or -1
// with *problem (strerror), *no_ipv6 when the system has no IPv6 at all.
int ListenIpv6(const ListenAddress& address, std::string* problem, bool* no_ipv6);

// The port a listening socket got (for port 0).
int BoundPort(int fd);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_COMMANDS_LISTEN_ADDRESS_H_
