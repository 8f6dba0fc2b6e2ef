import type { OpenAPIRouter, Operation, ParsedRequest, Request as RouterRequest } from 'openapi-backend';

/**
 * Makes openapi-backend's router do its per-contract work once instead of on every request,
 * keeping it the router that maps each request to its operationId (and so to its handler).
 *
 * openapi-backend 5.20 (and 5.21, checked) flattens the operation list with lodash on every
 * call, compiles a RegExp per path template per request, and parses each request twice
 * (headers re-keyed, query deep-cloned, cookies parsed, the path template compiled again to
 * read the parameters): about a quarter of a read's CPU in the bench's profile. The contract
 * does not change while the app runs, so its three router methods are replaced on this
 * instance by equivalents over tables built once here:
 * - getOperations(): the list, built once;
 * - matchOperation(): the same decision as the library's — an exact path+method match first,
 *   then the templates (each `{name}` one non-empty segment) tried most specific first (longest
 *   literal part, ties in contract order), 404 when no path matches, 405 when a path matches
 *   but not the method — over precompiled patterns bucketed by segment count;
 * - parseRequest(): the path parameters (percent-decoded, a malformed `%` still throws
 *   URIError) by the matched template's precompiled pattern. The app reads nothing else of the
 *   parsed request (validation is ours, not openapi-backend's), so headers and query are handed
 *   on as express parsed them and cookies are not parsed (no operation reads a cookie).
 */
export function precompileRoutes(router: OpenAPIRouter): void {
  // the shortcuts below assume the library's defaults, which app.ts uses
  if (router.apiRoot !== '/' || !(router as unknown as { ignoreTrailingSlashes: boolean }).ignoreTrailingSlashes) throw new Error('precompileRoutes: expects apiRoot "/" and ignoreTrailingSlashes');
  const operations = router.getOperations();

  interface Route { template: string; pattern: RegExp; names: string[]; specificity: number; order: number; methods: Map<string, Operation> }
  const routes = new Map<string, Route>();
  for (const op of operations) {
    let route = routes.get(op.path);
    if (!route) {
      const names: string[] = [];
      const source = op.path
        .split(/\{(.*?)\}/)
        .map((part, i) => (i % 2 ? (names.push(part), '([^/]+)') : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('');
      route = { template: op.path, pattern: new RegExp(`^${source}$`), names, specificity: op.path.replace(/\{.*?\}/g, '').length, order: routes.size, methods: new Map() };
      routes.set(op.path, route);
    }
    if (!route.methods.has(op.method)) route.methods.set(op.method, op); // the library takes the first too
  }
  const literal = new Map([...routes.values()].filter((r) => r.names.length === 0).map((r) => [r.template, r]));
  // a template matches only paths with as many segments as itself
  const bySegments = new Map<number, Route[]>();
  for (const route of [...routes.values()].sort((a, b) => b.specificity - a.specificity || a.order - b.order)) {
    const n = segments(route.template);
    bySegments.set(n, [...(bySegments.get(n) ?? []), route]);
  }

  function match(req: RouterRequest): { route: Route; op: Operation } | '404' | '405' {
    const path = normalizedPath(req.path);
    const method = req.method.trim().toLowerCase();
    const exact = literal.get(path)?.methods.get(method);
    if (exact) return { route: literal.get(path)!, op: exact };
    let pathMatched = false;
    for (const route of bySegments.get(segments(path)) ?? []) {
      if (!route.pattern.test(path)) continue;
      pathMatched = true;
      const op = route.methods.get(method);
      if (op) return { route, op };
    }
    return pathMatched ? '405' : '404';
  }

  router.getOperations = () => operations;
  router.matchOperation = ((req: RouterRequest, strict?: boolean) => {
    const found = match(req);
    if (typeof found === 'object') return found.op;
    if (!strict) return undefined;
    // the messages the library throws: handleRequest picks its 404 or 405 handler by them
    throw Error(found === '405' ? '405-methodNotAllowed: this method is not registered for the route' : '404-notFound: no route matches request');
  }) as OpenAPIRouter['matchOperation'];
  router.parseRequest = (req: RouterRequest, operation?: Operation): ParsedRequest => {
    const params: Record<string, string> = {};
    if (operation) {
      const route = routes.get(operation.path)!;
      const values = route.pattern.exec(normalizedPath(req.path));
      route.names.forEach((name, i) => {
        if (values) params[name] = decodeURIComponent(values[i + 1]);
      });
    }
    return { method: req.method.trim().toLowerCase(), path: req.path, params, headers: req.headers, query: req.query ?? {}, cookies: {}, requestBody: req.body };
  };
}

/** The library's normalisation for apiRoot "/": one leading slash, no query string, no trailing slashes. */
function normalizedPath(raw: string | undefined): string {
  let path = raw?.trim() ?? '';
  if (!path.startsWith('/')) path = `/${path}`;
  const query = path.indexOf('?');
  if (query >= 0) path = path.slice(0, query);
  if (path.startsWith('//')) path = path.slice(1); // the library strips apiRoot and one more slash
  let end = path.length;
  while (end > 1 && path.charCodeAt(end - 1) === 47 /* / */) end--;
  return path.slice(0, end);
}

function segments(path: string): number {
  let n = 0;
  for (let i = 0; i < path.length; i++) if (path.charCodeAt(i) === 47) n++;
  return n;
}
