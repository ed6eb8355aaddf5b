#include "libgpuwatch/base/fds.h"

#include <fcntl.h>
#include <unistd.h>

namespace gpuwatch {

int AboveStdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return moved;
}

bool PipeAboveStdio(int fds[2], int flags) {
  int made[2] = {-1, -1};
  if (pipe2(made, flags) != 0) return false;
  // Moved together: moving the read end first could free a slot of 0-2
  // that the write end's move would then not take (it asks for >= 3).
  const int read_end = AboveStdio(made[0]);
  const int write_end = AboveStdio(made[1]);
  if (read_end < 0 || write_end < 0) {
    if (read_end >= 0) close(read_end);
    if (write_end >= 0) close(write_end);
    return false;
  }
  fds[0] = read_end;
  fds[1] = write_end;
  return true;
}

}  // namespace gpuwatch
