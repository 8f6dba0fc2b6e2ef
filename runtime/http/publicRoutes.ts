import path from 'node:path';
import express, { Router, type Response } from 'express';
import type { Knex } from 'knex';
import { pendingMigrations } from '../storage/migrate';
import { metricsAccessError, metricsText, METRICS_CONTENT_TYPE } from '../observability/metrics';
import { checkReadiness, notReady, READY_BODY } from '../observability/readiness';
import { servedContractDocuments } from './contractDocuments';
import { contextOf } from './requestContext';

/**
 * Routes that need no API key: liveness and readiness, metrics (a token of their own when
 * METRICS_TOKEN is set), the two contract documents, the reference page and its icon.
 */
export function publicRoutes(db: Knex, options: { metricsToken?: string; publicBaseUrl?: string } = {}): Router {
  const router = Router();
  const documents = servedContractDocuments(options.publicBaseUrl);

  // liveness: the process answers; nothing else is checked, so a database outage does not get
  // a healthy process restarted
  router.get('/healthz', (_req, res) => {
    named(res, 'getHealth', '/healthz');
    res.json({ status: 'ok' });
  });
  // readiness: the database answers and has every migration this code expects
  // (observability/readiness.ts, shared with the delivery engine's own listener)
  router.get('/readyz', async (_req, res, next) => {
    named(res, 'getReadiness', '/readyz');
    const readiness = await checkReadiness(() => pendingMigrations(db));
    if (!readiness.ready) {
      return next(notReady(readiness.reason));
    }
    res.json(READY_BODY);
  });
  router.get('/metrics', async (req, res, next) => {
    const refused = metricsAccessError(req.headers.authorization, options.metricsToken);
    if (refused) return next(refused);
    try {
      const text = await metricsText();
      res.type(METRICS_CONTENT_TYPE).send(text);
    } catch (err) {
      next(err);
    }
  });
  router.get('/openapi.json', (_req, res) => { res.json(documents.openapi); });
  router.get('/openapi-sdk.json', (_req, res) => { res.json(documents.sdk); });

  // API reference: Swagger UI from the swagger-ui-dist package, every asset served from here
  // (no network at run time), reading the served /openapi.json.
  const swaggerUiDir = path.dirname(require.resolve('swagger-ui-dist/package.json'));
  router.use('/docs/assets', express.static(swaggerUiDir, { index: false, maxAge: '1h' }));
  router.get(['/docs', '/docs/'], (_req, res) => { res.type('html').send(DOCS_PAGE); });
  // browsers ask for /favicon.ico on their own (the docs page names its icon, other pages such
  // as /openapi.json opened in a tab do not): answer with Swagger UI's icon rather than a 404
  const favicon = path.join(swaggerUiDir, 'favicon-32x32.png');
  router.get('/favicon.ico', (_req, res) => { res.type('png').set('Cache-Control', 'public, max-age=86400').sendFile(favicon); });
  return router;
}

/**
 * The contract's operation a public route serves, for its log line and its `http_requests_total`
 * label: a readiness probe's 503 is `getReadiness`'s, not one of the API's operations' (routes
 * outside the contract — /metrics, the documents, the docs page — stay `none`).
 */
function named(res: Response, operationId: 'getHealth' | 'getReadiness', route: string): void {
  const context = contextOf(res);
  context.operationId = operationId;
  context.route = route;
}

// The page loads the contract itself so that "Try it out" calls the server the page came from,
// wherever it runs, before the contract's own servers entries.
const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Field Operations API — reference</title>
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
  <link rel="icon" type="image/png" sizes="32x32" href="/docs/assets/favicon-32x32.png">
  <style>
    body { margin: 0; }
    .contract-links { font: 14px sans-serif; padding: 8px 20px; background: #1b1b1b; color: #ddd; }
    .contract-links a { color: #9cdcfe; margin-right: 16px; }
  </style>
</head>
<body>
  <nav class="contract-links">
    Contract: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1)
    <a href="/openapi-sdk.json">/openapi-sdk.json</a> (OpenAPI 3.0.3, for SDK generators)
  </nav>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script>
    fetch('/openapi.json')
      .then(function (res) { return res.json(); })
      .then(function (spec) {
        var here = window.location.origin;
        spec.servers = [{ url: here, description: 'This server' }].concat((spec.servers || []).filter(function (s) { return s.url !== here; }));
        window.ui = SwaggerUIBundle({ spec: spec, dom_id: '#swagger-ui', deepLinking: true, validatorUrl: null });
      });
  </script>
</body>
</html>
`;
