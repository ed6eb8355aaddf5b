// Process-lifetime singletons for the simulator's state.
#ifndef GWSIM_COMMON_LEAKED_H_
#define GWSIM_COMMON_LEAKED_H_

namespace gwsim {

// The one T of the process, made on first use and never destroyed: callbacks, records and
// calls from other libraries may still arrive while the process exits.
template <typename T>
T& Leaked() {
  static auto* const instance = new T();
  return *instance;
}

}  // namespace gwsim

#endif  // GWSIM_COMMON_LEAKED_H_
