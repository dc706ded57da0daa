import { describe, expect, it } from 'vitest';
import { FAMILIES } from '../../src/control-plane/api/objects/families.ts';
import { RESOURCES } from '../../src/control-plane/api/resource-list.ts';

describe('the list of REST resources', () => {
  it('declares exactly the resources the API serves, in the order it registers them', () => {
    expect(FAMILIES.map((family) => family.resource)).toEqual(RESOURCES);
    expect(FAMILIES.every((family, i) => family.resource === RESOURCES[i])).toBe(true);
  });
});
