// The exporter's IPv6 listener: each connection accepted on an IPv6 socket is
// relayed, both ways, to the HTTP server listening on 127.0.0.1 (Debian's
// civetweb is built without IPv6). The HTTP server keeps its own limits (16
// workers, a 5 s request deadline): a connection it closes is closed here.
#ifndef GPUWATCH_TOOLS_COMMANDS_TCP_RELAY_H_
#define GPUWATCH_TOOLS_COMMANDS_TCP_RELAY_H_

#include <memory>
#include <thread>

namespace gpuwatch::tools {

class TcpRelay {
 public:
  // Takes `listen_fd` (listening); relays to 127.0.0.1:target_port, with at
  // most `max_connections` at once (the others wait in the socket's backlog).
  TcpRelay(int listen_fd, int target_port, int max_connections);
  ~TcpRelay();  // stops accepting, closes every connection and waits for them
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::thread acceptor_;
};

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_COMMANDS_TCP_RELAY_H_
