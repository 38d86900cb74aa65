// Node.js's own command-line flags for the server and the controller, as the image's ENTRYPOINT
// gives them (test/image.test.ts checks the running container's command line) and as the
// benches start ours, so that what is measured is what runs: none. With a V8 flag on the
// command line Node.js would compile every built-in module a start loads rather than take it
// from its code cache; V8's settings are given by the launcher instead, once those modules are
// loaded (hack/bundle/launcher.cjs, which says why each).
export const NODE_ARGS: readonly string[] = [];
