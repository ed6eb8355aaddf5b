#include "tools/commands/listen_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace gpuwatch::tools {
namespace {

constexpr const char* kExpected = " (expected HOST:PORT or :PORT, e.g. 127.0.0.1:9468)";

bool ParsePort(const std::string& text, int* port) {
  if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *port = std::stoi(text);
  return *port <= 65535;
}

// A name's address, IPv4 first; false with *problem when it has none.
bool Resolve(const std::string& name, ListenAddress* out, std::string* problem) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    *problem = std::string("cannot resolve the host: ") + gai_strerror(rc);
    return false;
  }
  const addrinfo* pick = found;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  }
  char text[INET6_ADDRSTRLEN] = "";
  if (pick->ai_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(pick->ai_addr)->sin_addr, text,
              sizeof(text));
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(pick->ai_addr)->sin6_addr, text,
              sizeof(text));
    out->family = ListenAddress::Family::kIpv6;
  }
  freeaddrinfo(found);
  out->host = text;
  return true;
}

}  // namespace

bool ParseListenAddress(const std::string& value, ListenAddress* out, std::string* problem) {
  *out = ListenAddress{};
  const size_t colon = value.rfind(':');
  if (colon == std::string::npos) {
    int port = 0;
    *problem = ParsePort(value, &port)
                   ? "a port alone: write :" + value + " for every address or 127.0.0.1:" + value +
                         " for this machine only"
                   : std::string("no port") + kExpected;
    return false;
  }
  std::string host = value.substr(0, colon);
  if (!ParsePort(value.substr(colon + 1), &out->port)) {
    *problem = "the port is not a number from 0 to 65535";
    return false;
  }
  in_addr v4{};
  in6_addr v6{};
  if (host.empty()) {
    out->family = ListenAddress::Family::kAny;
    out->host = "::";
    out->shown = "[::]";
    return true;
  }
  if (host.front() == '[') {
    if (host.size() < 2 || host.back() != ']') {
      *problem = "no closing bracket around the IPv6 address (e.g. [::1]:9468)";
      return false;
    }
    host = host.substr(1, host.size() - 2);
    if (inet_pton(AF_INET6, host.c_str(), &v6) != 1) {
      *problem = "not an IPv6 address in the brackets: " + host;
      return false;
    }
    out->family = ListenAddress::Family::kIpv6;
    out->host = host;
    out->shown = "[" + host + "]";
    return true;
  }
  if (host.find(':') != std::string::npos) {
    *problem = "an IPv6 address goes in brackets: [" + host + "]:" + value.substr(colon + 1);
    return false;
  }
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    out->host = host;
  } else if (!Resolve(host, out, problem)) {
    return false;
  }
  out->shown = host;  // a name stays as typed, whichever address it has
  return true;
}

std::string CivetwebPorts(const ListenAddress& address) {
  return address.host + ":" + std::to_string(address.port);
}

std::string Ipv4ListenProblem(const ListenAddress& address) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::strerror(errno);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(address.port));
  inet_pton(AF_INET, address.host.c_str(), &a.sin_addr);
  const int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a));
  const int err = errno;
  close(fd);
  return rc != 0 ? std::strerror(err) : "the HTTP server did not start";
}

int ListenIpv6(const ListenAddress& address, std::string* problem, bool* no_ipv6) {
  *no_ipv6 = false;
  const int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *no_ipv6 = errno == EAFNOSUPPORT;
    *problem = std::strerror(errno);
    return -1;
  }
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  // `::` (and `:PORT`) take IPv4 clients too, as ::ffff:a.b.c.d, where the
  // system lets a socket be both (net.ipv6.bindv6only=0, Linux's default).
  const int v6only = address.host == "::" ? 0 : 1;
  setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(static_cast<uint16_t>(address.port));
  inet_pton(AF_INET6, address.host.c_str(), &a.sin6_addr);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 128) != 0) {
    // No IPv6 address on the machine (ipv6.disable=1 keeps the family).
    *no_ipv6 = errno == EADDRNOTAVAIL && address.host == "::";
    *problem = std::strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
}

}  // namespace gpuwatch::tools
