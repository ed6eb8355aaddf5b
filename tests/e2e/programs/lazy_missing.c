/* A library with a call to a function nobody defines, bound lazily: calling
 * lazy_exit_call_missing() makes the dynamic loader end the process (127). */
void lazy_exit_symbol_nobody_defines(void);

__attribute__((visibility("default"))) void lazy_exit_call_missing(void) {
  lazy_exit_symbol_nobody_defines();
}
