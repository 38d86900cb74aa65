// A Node-API addon with one job: prctl(PR_SET_DUMPABLE, 0) on the process that loads it.
// A non-dumpable process's /proc/<pid>/environ, mem, maps, fd/ and the like belong to root
// and ptrace refuses it, so another process of the same user (terraform run by a PR, or
// anything it starts) cannot read the secrets in the server's environment or memory. Node.js
// has no prctl; the rest is in non-dumpable.ts. Built by hack/bundle.mjs; Linux only.
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <node_api.h>

// setNonDumpable(): throws when the kernel refuses.
static napi_value set_non_dumpable(napi_env env, napi_callback_info info) {
  (void)info;
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) napi_throw_error(env, NULL, strerror(errno));
  return NULL;
}

// isDumpable(): the kernel's current setting for this process.
static napi_value is_dumpable(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  napi_get_boolean(env, prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0, &result);
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "setNonDumpable", NAPI_AUTO_LENGTH, set_non_dumpable, NULL, &fn);
  napi_set_named_property(env, exports, "setNonDumpable", fn);
  napi_create_function(env, "isDumpable", NAPI_AUTO_LENGTH, is_dumpable, NULL, &fn);
  napi_set_named_property(env, exports, "isDumpable", fn);
  return exports;
}
