import type { operations } from '../../generated/types';

/**
 * The filters of a list operation: its query parameters as the contract types them, paging
 * aside. Repositories take these instead of a hand-written copy, so a filter added to the
 * contract shows up here: the contract types everything.
 */
export type ListFilters<Id extends keyof operations> = Omit<NonNullable<operations[Id]['parameters']['query']>, 'limit' | 'cursor'>;
