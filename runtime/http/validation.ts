import type { ErrorObject, ValidateFunction } from 'ajv';
import { ApiError, ErrorDetail } from '../errors';

/** At most this many problems are reported: enough to fix a request, bounded for hostile input. */
export const MAX_ERROR_DETAILS = 20;

/**
 * The contract's pattern for a name, title, label, address or message that must not be blank: one
 * character that is neither white space nor invisible — soft hyphen, combining grapheme joiner,
 * Arabic letter mark, the Hangul and Khmer fillers, Mongolian free variation selectors and vowel
 * separator, zero-width space and joiners, direction marks, embeddings and isolates, word joiner
 * and the invisible operators, braille blank, variation selectors, byte order mark. JavaScript's
 * `\s` alone lets a name of zero-width spaces through. Written with `\u` escapes, it means the
 * same with and without a regular expression's `u` flag, so an SDK's client-side check in
 * JavaScript agrees. Characters outside the Basic Multilingual Plane (the tag characters) cannot
 * be named in such a class, and pass.
 */
const NOT_BLANK_PATTERN = '[^\\s\\u00AD\\u034F\\u061C\\u115F\\u1160\\u17B4\\u17B5\\u180B-\\u180F\\u200B-\\u200F\\u202A-\\u202E\\u2060-\\u206F\\u2800\\u3164\\uFE00-\\uFE0F\\uFEFF\\uFFA0]';

/**
 * Validates `data` with a generated validator (which may coerce query strings and fill in
 * defaults in place) and returns it, or throws 400 VALIDATION_ERROR whose details point into
 * the request: `/readings/3/value` for the body, `/query/limit`, `/path/id`.
 */
export function validateOrThrow<T>(validate: ValidateFunction, data: T, prefix: string, rule?: string | null): T {
  if (validate(data)) {
    const unstorable = findUnstorableValue(data, prefix);
    if (unstorable) throw new ApiError('VALIDATION_ERROR', `${unstorable.path}: ${unstorable.message}`, [unstorable]);
    return data;
  }
  const details = toDetails(validate.errors ?? [], prefix, rule ?? undefined);
  const first = details[0];
  const more = details.length > 1 ? ` (and ${details.length - 1} more)` : '';
  const where = prefix === '' ? 'Request body' : prefix === '/query' ? 'Query' : 'Path';
  throw new ApiError('VALIDATION_ERROR', first ? `${first.path || where}: ${first.message}${more}` : `${where} is invalid`, details);
}

/**
 * Validates the query string. Its values are text that the validator turns into the declared
 * types; a number is taken only as written in decimal (`50`, `2.5`, `-3`): Ajv's coercion alone
 * would also read `0x10` as 16 and ` 5`, `+5` or `1e1` as numbers.
 */
export function validateQueryOrThrow<T extends Record<string, unknown>>(validate: ValidateFunction, raw: T, rawQueryString: string, known: readonly string[] = []): T {
  // the query parser turns a percent-escape that is not UTF-8 (`%FF`) into U+FFFD, and keeps a
  // malformed one (`%`, `%ZZ`) as text; a path is refused for either, and so is a query
  try {
    decodeURIComponent(rawQueryString.replace(/\+/g, ' '));
  } catch {
    const detail = { path: '/query', message: 'has a malformed percent-escape, or one that is not UTF-8' };
    throw new ApiError('VALIDATION_ERROR', 'The query string has a malformed percent-encoding', [detail]);
  }
  let query: T;
  try {
    query = validateOrThrow(validate, { ...raw }, '/query');
  } catch (err) {
    if (err instanceof ApiError) throw withKnownParameters(withPlusHint(err, raw), known);
    throw err;
  }
  for (const [name, value] of Object.entries(query)) {
    const sent = raw[name];
    if (typeof value === 'number' && typeof sent === 'string' && !DECIMAL.test(sent)) {
      const detail = { path: `/query/${name}`, message: 'must be a number written in decimal digits' };
      throw new ApiError('VALIDATION_ERROR', `${detail.path}: ${detail.message}`, [detail]);
    }
  }
  return query;
}

const DECIMAL = /^-?\d+(\.\d+)?$/;

/**
 * An unknown query parameter's refusal names the ones the operation takes: the change feed's
 * `after` where a client sent the other lists' `cursor`, a filter misspelt.
 */
function withKnownParameters(err: ApiError, known: readonly string[]): ApiError {
  const takes = known.length ? `this operation's query parameters are ${known.join(', ')}` : 'this operation takes no query parameters';
  return withHintedDetails(err, (detail) => (detail.path?.startsWith('/query/') && detail.message === 'is not a known field' ? `${detail.message}; ${takes}` : undefined));
}

/** The error with the details `hint` gives a new message for changed, and its message too when it leads with the first of them. */
function withHintedDetails(err: ApiError, hint: (detail: ErrorDetail) => string | undefined): ApiError {
  const hinted = err.details?.map((detail) => {
    const message = hint(detail);
    return message === undefined ? detail : { ...detail, message };
  });
  if (!hinted || !hinted.some((d, i) => d !== err.details![i])) return err;
  const first = err.details![0];
  return new ApiError(err.code, err.message.replace(`${first.path}: ${first.message}`, `${hinted[0].path}: ${hinted[0].message}`), hinted, err.headers);
}

/**
 * A time sent with its `+hh:mm` offset unescaped reaches the server with a space for the `+`
 * (a URL's query reads `+` as a space): the date-time refusal of such a value says so.
 */
function withPlusHint(err: ApiError, raw: Record<string, unknown>): ApiError {
  return withHintedDetails(err, (detail) => {
    const sent = raw[(detail.path ?? '').replace(/^\/query\//, '')];
    return detail.message.startsWith('must be an RFC 3339 date-time') && typeof sent === 'string' && /T\d{2}:\d{2}(:\d{2}(\.\d+)?)? \d{2}:\d{2}$/.test(sent)
      ? `${detail.message}; a + in a URL's query is read as a space: write the offset +${sent.slice(-5)} as %2B${sent.slice(-5)}`
      : undefined;
  });
}

/**
 * `rule`: the body's rule as a whole, in words (the operation index's `bodyRule`), shown for a
 * failed top-level `oneOf`/`anyOf`/`not` in place of the validator's message, and in place of the
 * `required` of each alternative (which would each claim one field is required).
 */
function toDetails(errors: ErrorObject[], prefix: string, rule?: string): ErrorDetail[] {
  const seen = new Set<string>();
  const out: ErrorDetail[] = [];
  for (const e of mergeEnumAlternatives(errors)) {
    let path = prefix + e.instancePath;
    let message = e.message ?? 'is invalid';
    const topLevel = rule !== undefined && e.instancePath === '';
    if (topLevel && /^#\/(oneOf|anyOf)\/\d+\/required$/.test(e.schemaPath)) continue;
    if (topLevel && ['oneOf', 'anyOf', 'not'].includes(e.keyword) && e.schemaPath === `#/${e.keyword}`) {
      message = `must follow the rule: ${rule}`;
    } else if (e.keyword === 'additionalProperties') {
      path += `/${(e.params as { additionalProperty: string }).additionalProperty}`;
      message = 'is not a known field';
    } else if (e.keyword === 'required') {
      path += `/${(e.params as { missingProperty: string }).missingProperty}`;
      message = 'is required';
    } else if (e.keyword === 'dependentRequired') {
      path += `/${(e.params as { missingProperty: string }).missingProperty}`;
      message = `is required when ${(e.params as { property: string }).property} is given`;
    } else if (e.keyword === 'propertyNames') {
      path += `/${(e.params as { propertyName: string }).propertyName}`;
      if (out.some((d) => d.path === path)) continue; // the key's own error already says why
      message = 'is not an allowed key';
    } else if (e.propertyName !== undefined) {
      // the reason a key failed `propertyNames`: name the key, not only the object
      path += `/${e.propertyName}`;
      message = `key ${message}`;
    } else if (e.keyword === 'enum') {
      message = `must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
    } else if (e.keyword === 'format' && (e.params as { format: string }).format === 'date-time') {
      message = 'must be an RFC 3339 date-time with a time zone offset, e.g. 2026-11-22T04:19:50.123Z, of a year from 0000 to 9999 in UTC';
    } else if (e.keyword === 'pattern' && (e.params as { pattern: string }).pattern === NOT_BLANK_PATTERN) {
      // the contract's way of saying "not blank" (a name, a title, a message); an empty value
      // already has its minLength error
      if (out.some((d) => d.path === path)) continue;
      message = 'must not be blank: it has no character but white space or invisible ones';
    }
    const key = `${path} ${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ path, message });
    if (out.length >= MAX_ERROR_DETAILS) break;
  }
  return out;
}

/**
 * A value that may be from one list or another (an `anyOf`/`oneOf` of enums, such as an event type
 * or a pattern) failed all of them: one error listing every allowed value, in place of one per
 * list and the validator's "must match a schema in anyOf". The validator reports the alternatives'
 * errors just before the `anyOf`'s own, at the same place in the instance.
 */
function mergeEnumAlternatives(errors: ErrorObject[]): ErrorObject[] {
  const out: ErrorObject[] = [];
  for (const e of errors) {
    if (e.keyword === 'anyOf' || e.keyword === 'oneOf') {
      // each alternative's `enum`, and its `type` when the value is not even a string
      let start = out.length;
      while (start > 0 && out[start - 1].instancePath === e.instancePath && ['enum', 'type'].includes(out[start - 1].keyword)) start--;
      const failed = out.slice(start);
      const lists = failed.filter((f) => f.keyword === 'enum');
      if (lists.length > 1) {
        const allowedValues = lists.flatMap((a) => (a.params as { allowedValues: unknown[] }).allowedValues);
        out.splice(start, failed.length, { ...lists[0], params: { allowedValues } });
        continue;
      }
    }
    out.push(e);
  }
  return out;
}

/**
 * Values JSON Schema lets through that no database column can hold faithfully: numbers that
 * are not finite (`1e400` parses to Infinity, in a body or a coerced query), and strings with
 * U+0000 (Postgres text refuses it) or an unpaired surrogate (not representable in UTF-8).
 */
function findUnstorableValue(value: unknown, path: string): ErrorDetail | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : { path, message: 'must be a finite number' };
  if (typeof value === 'string') {
    return value.includes('\u0000') || !value.isWellFormed() ? { path, message: 'must not contain U+0000 or unpaired surrogates' } : undefined;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findUnstorableValue(value[i], `${path}/${i}`);
      if (found) return found;
    }
  } else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      const found = findUnstorableValue(key, `${path}/${key}`) ?? findUnstorableValue(item, `${path}/${key}`);
      if (found) return found;
    }
  }
  return undefined;
}
