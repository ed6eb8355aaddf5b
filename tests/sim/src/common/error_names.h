// The name and the description of an error code, from an X-macro list of X(code, text).
#ifndef GWSIM_COMMON_ERROR_NAMES_H_
#define GWSIM_COMMON_ERROR_NAMES_H_

// Defines `const char* ErrorName(Type)` (the code's own name) and `const char* ErrorString(Type)`
// (its text) over the codes of LIST; both return `unknown` for a code not in it.
#define GWSIM_ERROR_NAME_AND_STRING(Type, LIST, unknown)                    \
  GWSIM_ERROR_LOOKUP(ErrorName, Type, LIST, GWSIM_ERROR_NAME_CASE, unknown) \
  GWSIM_ERROR_LOOKUP(ErrorString, Type, LIST, GWSIM_ERROR_STRING_CASE, unknown)

#define GWSIM_ERROR_LOOKUP(Function, Type, LIST, CASE, unknown) \
  const char* Function(Type error) {                            \
    switch (error) {                                            \
      LIST(CASE)                                                \
      default:                                                  \
        return unknown;                                         \
    }                                                           \
  }
#define GWSIM_ERROR_NAME_CASE(code, text) \
  case code:                              \
    return #code;
#define GWSIM_ERROR_STRING_CASE(code, text) \
  case code:                                \
    return text;

#endif  // GWSIM_COMMON_ERROR_NAMES_H_
