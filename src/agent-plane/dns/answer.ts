import { isIPv4, isIPv6 } from 'node:net';
import dnsPacket, { type Answer, type Packet, type Question } from 'dns-packet';
import { addressesOf, type ZoneData, zoneOf } from './zones.ts';

const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 };
/** Answers are short-lived: zone data changes with the API, challenges within minutes. */
const TTL = 60;
const CHALLENGE_TTL = 1;

/** What an answer needs: the zone data, the name servers, and the pending DNS-01 values. */
export interface AnswerSources {
  zones: ZoneData;
  nameServers: string[];
  /** The TXT values of pending DNS-01 challenges at a name (read from the store). */
  challenges(name: string): Promise<string[]>;
}

function reply(query: Packet, rcode: number, sections: Partial<Packet> = {}): Packet {
  const recursionDesired = (query.flags ?? 0) & dnsPacket.RECURSION_DESIRED;
  // Authoritative only for answers from a served zone, not for refusals and errors.
  const authoritative = rcode === RCODE.NOERROR || rcode === RCODE.NXDOMAIN;
  return {
    id: query.id,
    type: 'response',
    flags: (authoritative ? dnsPacket.AUTHORITATIVE_ANSWER : 0) | recursionDesired | rcode,
    questions: query.questions,
    answers: [],
    authorities: [],
    ...sections,
  };
}

function soa(zone: string, nameServers: string[]): Answer {
  return {
    name: zone,
    type: 'SOA',
    ttl: TTL,
    data: {
      mname: nameServers[0],
      rname: `hostmaster.${zone}`,
      serial: 1,
      refresh: 3600,
      retry: 600,
      expire: 604800,
      // Negative answers are cached this long (RFC 2308).
      minimum: TTL,
    },
  };
}

/** The records of one question inside a served zone; undefined when the name does not exist. */
async function records(
  question: Question,
  zone: string,
  sources: AnswerSources,
): Promise<Answer[] | undefined> {
  const name = question.name.toLowerCase();
  // Answers repeat the question's spelling: resolvers may randomize its case (0x20).
  const owner = question.name;
  const addresses = addressesOf(sources.zones, name, zone);
  const txt = question.type === 'TXT' ? await sources.challenges(name) : [];
  if (name !== zone && addresses === undefined && txt.length === 0) return undefined;
  switch (question.type) {
    case 'SOA':
      return name === zone ? [soa(zone, sources.nameServers)] : [];
    case 'NS':
      return name === zone
        ? sources.nameServers.map((data) => ({ name: owner, type: 'NS' as const, ttl: TTL, data }))
        : [];
    case 'A':
    case 'AAAA': {
      const family = question.type === 'A' ? isIPv4 : isIPv6;
      const type = question.type;
      return (addresses ?? [])
        .filter((ip) => family(ip))
        .map((data) => ({ name: owner, type, ttl: TTL, data }));
    }
    case 'TXT':
      return txt.map((data) => ({ name: owner, type: 'TXT' as const, ttl: CHALLENGE_TTL, data }));
    default:
      return [];
  }
}

/** The response to a decoded query: authoritative for the served zones, REFUSED for others. */
export async function answerQuery(query: Packet, sources: AnswerSources): Promise<Packet> {
  const opcode = ((query.flags ?? 0) >> 11) & 0xf;
  if (opcode !== 0) return reply(query, RCODE.NOTIMP);
  const question = query.questions?.[0];
  if (question === undefined || query.questions!.length !== 1) return reply(query, RCODE.FORMERR);
  const zone = zoneOf(sources.zones, question.name.toLowerCase());
  if (zone === undefined) return reply(query, RCODE.REFUSED);
  const answers = await records(question, zone, sources);
  if (answers === undefined) {
    return reply(query, RCODE.NXDOMAIN, { authorities: [soa(zone, sources.nameServers)] });
  }
  // No records of the type (NODATA): the SOA says for how long to remember it.
  const authorities = answers.length === 0 ? [soa(zone, sources.nameServers)] : [];
  return reply(query, RCODE.NOERROR, { answers, authorities });
}

/** A SERVFAIL response (the store did not answer). */
export function serverFailure(query: Packet): Packet {
  return reply(query, RCODE.SERVFAIL);
}
