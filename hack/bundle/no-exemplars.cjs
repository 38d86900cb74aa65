// Stands in for @opentelemetry/api inside prom-client's bundled code: prom-client calls it only
// for exemplars, which no metric here enables. No span, so no exemplar labels.
exports.trace = { getSpan: () => undefined };
exports.context = { active: () => undefined };
