// Node.js's own flags for the server and the controller, as the image's ENTRYPOINT gives them
// (test/image.test.ts checks the running container's command line) and as the benches start
// ours, so that what is measured is what runs.
// --max-semi-space-size=1: V8's young generation capped at 1 MiB per semi-space (by default it
// grows to 16 as allocation goes on). Webhooks, job output and API answers are short-lived
// objects; with the cap the server's peak RSS is lower and its scavenges shorter, for the same
// CPU (figures in docs/reliability.md).
export const NODE_ARGS: readonly string[] = ['--max-semi-space-size=1'];
