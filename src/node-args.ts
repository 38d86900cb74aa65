// Node.js's own flags for the server and the controller, as the image's ENTRYPOINT gives them
// (test/image.test.ts checks the running container's command line) and as the benches start
// ours, so that what is measured is what runs.
// --max-semi-space-size=1: V8's young generation capped at 1 MiB per semi-space (by default it
// grows to 16 as allocation goes on). Webhooks, job output and API answers are short-lived
// objects; with the cap the server's peak RSS is lower and its scavenges shorter, for the same
// CPU (figures in docs/reliability.md).
// --interrupt-budget=1000000: TurboFan optimizes a function after about 15 times the work of
// the default (67584). A server mostly waits on terraform: code a plan runs through a few times
// is no longer optimized, nor is TurboFan's compile memory kept by the process, while code that
// runs often (a burst of webhooks) still is (figures in docs/reliability.md).
export const NODE_ARGS: readonly string[] = ['--max-semi-space-size=1', '--interrupt-budget=1000000'];
