package sisxml

// Identity returns the business identity SNDR|TYPE|STYP|SEQN (seed 000 §2),
// with "|YYYYMMDD" (the day of DTTM, as sent) appended when
// includeDayBoundary is set — PARAM msgx.identity.include-day-boundary, for
// senders whose SEQN resets daily. The algorithm must not change once a
// pipeline is live: identities bound under one setting never match the other.
func Identity(meta Meta, includeDayBoundary bool) string {
	id := meta.SNDR + "|" + meta.TYPE + "|" + meta.STYP + "|" + meta.SEQN
	if includeDayBoundary {
		id += "|" + meta.DTTM.Format("20060102")
	}
	return id
}

// Kind returns TYPE-STYP (upper case), the key ignore rules match
// case-insensitively against TYPE-STYP or TYPE-* (seed 000 §2).
func (m Meta) Kind() string { return m.TYPE + "-" + m.STYP }
