// What the server uses of prom-client (hack/bundle.mjs bundles this in its place): its index
// also loads the Pushgateway (node:https, node:zlib), the cluster aggregator and, for
// exemplars, @opentelemetry/api, which no server here uses, and every start would load them.
exports.Registry = require('prom-client/lib/registry');
exports.Counter = require('prom-client/lib/counter');
exports.Gauge = require('prom-client/lib/gauge');
exports.Histogram = require('prom-client/lib/histogram');
exports.Summary = require('prom-client/lib/summary');
exports.collectDefaultMetrics = require('prom-client/lib/defaultMetrics');
