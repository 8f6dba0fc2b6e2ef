import { isUtf8 } from 'node:buffer';
import express, { Request, Response } from 'express';
import { ApiError } from '../errors';

const parsers = new Map<number, ReturnType<typeof express.json>>();

/**
 * Reads the JSON body of an operation that takes one. Runs after routing and auth, so an
 * unknown path answers 404 and an unauthenticated caller 401 without the body being read.
 * Returns undefined when the request has no body.
 */
export async function readJsonBody(req: Request, res: Response, maxBodyBytes: number): Promise<unknown> {
  const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  if (!hasBody) return undefined;
  // node's parser undoes `chunked` only: another transfer coding (`gzip, chunked`) would reach
  // the JSON parser still coded. Compression is Content-Encoding's job.
  const transferEncoding = req.headers['transfer-encoding'];
  if (transferEncoding !== undefined && transferEncoding.trim().toLowerCase() !== 'chunked') {
    throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `Transfer-Encoding ${transferEncoding} is not supported: send chunked or with Content-Length, and compress with Content-Encoding`);
  }
  // application/json only, as the contract declares: a `+json` type names another format (a JSON
  // Patch array, a merge patch) whose meaning this API does not implement, better refused than
  // read as a plain body
  if (!req.is(['application/json'])) {
    throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `Content-Type must be application/json (got ${req.headers['content-type'] ?? 'none'})`);
  }
  // JSON between systems is UTF-8 (RFC 8259 §8.1): any other declared charset is refused alike
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(req.headers['content-type'] ?? '')?.[1].toLowerCase();
  if (charset !== undefined && charset !== 'utf-8') {
    throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `Request body must be UTF-8 JSON (got charset=${charset})`);
  }
  let parser = parsers.get(maxBodyBytes);
  if (!parser) {
    // strict: false so that `"text"` or `42` reach validation and get its clear message. The
    // bytes must be UTF-8: decoding would silently turn any other byte (Latin-1 text, say) into
    // U+FFFD and store that, where the client is better told.
    parser = express.json({ limit: maxBodyBytes, strict: false, type: () => true, verify: refuseInvalidUtf8 });
    parsers.set(maxBodyBytes, parser);
  }
  await new Promise<void>((resolve, reject) => {
    parser!(req, res, (err?: unknown) => (err ? reject(translateBodyError(err, maxBodyBytes, req.headers['content-encoding'])) : resolve()));
  });
  return req.body;
}

/** body-parser's `verify` (its failure arrives as `entity.verify.failed`); the charset is UTF-8, checked above. */
function refuseInvalidUtf8(_req: unknown, _res: unknown, buf: Buffer): void {
  if (!isUtf8(buf)) throw new Error('not UTF-8');
}

function translateBodyError(err: unknown, maxBodyBytes: number, contentEncoding: string | undefined): ApiError {
  const type = (err as { type?: string }).type;
  switch (type) {
    case 'entity.verify.failed':
      return new ApiError('INVALID_JSON', 'Request body is not valid UTF-8 (send JSON text encoded as UTF-8)');
    case 'entity.too.large':
      return new ApiError('PAYLOAD_TOO_LARGE', `Request body is larger than ${maxBodyBytes} bytes`);
    case 'entity.parse.failed':
      return new ApiError('INVALID_JSON', 'Request body is not valid JSON');
    case 'encoding.unsupported':
      return new ApiError('UNSUPPORTED_MEDIA_TYPE', `Content-Encoding ${contentEncoding} is not supported: send gzip, deflate, br or none`);
    case 'charset.unsupported':
      return new ApiError('UNSUPPORTED_MEDIA_TYPE', 'Request body must be UTF-8 JSON');
    default:
      // a body that does not decompress as its Content-Encoding says (zlib's and brotli's errors carry no type)
      if (contentEncoding !== undefined && contentEncoding !== 'identity') {
        return new ApiError('INVALID_JSON', `Request body is not ${contentEncoding} data, as its Content-Encoding says`);
      }
      return new ApiError('VALIDATION_ERROR', 'Request body could not be read');
  }
}
