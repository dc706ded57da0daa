/** Who is calling: the account an API key acts for, and the key itself (the audit principal). */
export interface Caller {
  accountId: string;
  keyId: string;
}
