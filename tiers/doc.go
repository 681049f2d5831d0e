// Package tiers holds nova-node's tier hierarchy: the four agent tiers L0–L3,
// the default tier of each of the 21 planetary agents, and the routing rules
// that say which tier may send what to which tier.
//
// The package is pure. It imports only the standard library (never another
// nova-node package, never libp2p), starts no goroutines, does no I/O and
// emits nothing: every decision is a value (nil or a typed error) and the
// caller performs any side effect.
//
// # Tiers
//
// [Tier] is 0..3. In text (YAML configuration, flags, logs) a tier is "L0".."L3";
// [ParseTier] also accepts "l2" and "2". In JSON a tier is a number 0..3, as in
// the seed's agent cards; [Tier.UnmarshalJSON] also accepts the text forms.
// [DefaultAssignments] is the seed's table of planetary agents (sun is L0;
// mercury, earth and jupiter are L1; venus, mars, pluto, saturn and titan are
// L2; the other twelve are L3).
//
// # Rules
//
// [Rules] is the seed's TierRoutingConfig: one [Rule] per source tier, listing
// the tiers it may send to and whether it must justify an escalation.
// [DefaultRules] are the seed's four rules (requirement 4.5): L0 may reach all
// tiers, L1 may reach L0 and L1, L2 may reach L0–L2, and L3 may reach all
// tiers; L2 and L3 must justify escalations.
//
// [Rules.Check] decides one delivery, in this order:
//
//  1. A source or target outside L0–L3 is a [*ViolationError].
//  2. A broadcast from L0 is delivered to every tier: an L0 directive reaches
//     all agents regardless of tier (requirement 11.3).
//  3. A reply is delivered (see below).
//  4. A target tier outside the source rule's allowed list is a
//     [*ViolationError] (TIER_VIOLATION). A broadcast from any other tier
//     therefore reaches only the tiers its rule allows.
//  5. A "task-proposal" sent down to a higher-authority tier (target L0 or L1,
//     and target < source) by a tier whose rule requires escalation
//     justification, with a blank justification, is an
//     [*EscalationRequiredError] (ESCALATION_REQUIRED). Escalation applies to
//     task proposals only (requirement 11.2): an L3 agent may send a
//     "request" or "notification" to L0 without justifying it, but may not
//     hand L0 or L1 work without saying why.
//  6. Anything else is delivered.
//
// Replies are exempt from the route table because the table governs who may
// start a conversation, not who may finish one. L1 → L2 is not an allowed
// initiating route, yet an L1 agent must be able to answer the L2 agent that
// asked it something (L2 → L1 is allowed); without the exemption every
// request from a lower tier would be a question that can never be answered.
//
// # What the caller must do
//
//  1. Validate configured rules once, at configuration time, with
//     [Rules.Validate]; Check assumes one rule per tier and treats a missing
//     rule as "no route".
//  2. Take Source and Target from the tiers of the verified agent cards of the
//     sender and the recipient, never from the tier a sender claims in its
//     envelope metadata. The receiving node re-checks; it does not trust the
//     sending node to have done so.
//  3. Set [Message.Reply] only for a "response" or "error" that answers a
//     request the Target itself sent (matched by correlation id against a
//     request the router saw leave that agent). Check cannot verify this.
//  4. For a broadcast, call Check once per recipient with Broadcast set and
//     deliver only to the recipients for which it returns nil.
//  5. On a [*ViolationError], reject the message and emit a security event; on
//     an [*EscalationRequiredError], reject it with the error's message. Log
//     every delivered cross-tier message (Source != Target) with both tiers and
//     the message type for audit (requirement 11.4). Both errors have a
//     Code method returning the seed's error code for the wire.
package tiers
