// Imported (not read from disk) so that tsc copies them into dist/ beside the code that serves them.
import openapi31 from '../../generated/openapi.json';
import openapi30 from '../../generated/openapi-sdk.json';

/** The bundled OpenAPI 3.1 document (canonical), as served at /openapi.json. */
export const contractDocument: object = openapi31;
/** Its OpenAPI 3.0.3 rendering for SDK generators, served at /openapi-sdk.json. */
export const sdkContractDocument: object = openapi30;

/**
 * The documents as this deployment serves them: with PUBLIC_BASE_URL set, their only server is
 * that URL (an SDK generated from them calls this deployment, not the contract's local server);
 * unset, exactly as generated.
 */
export function servedContractDocuments(publicBaseUrl: string | undefined): { openapi: object; sdk: object } {
  if (publicBaseUrl === undefined) return { openapi: contractDocument, sdk: sdkContractDocument };
  const servers = [{ url: publicBaseUrl, description: 'This deployment (PUBLIC_BASE_URL)' }];
  return { openapi: { ...contractDocument, servers }, sdk: { ...sdkContractDocument, servers } };
}
