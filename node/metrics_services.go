package node

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/discovery"
)

// serviceCollector exports the services' own counters and the fill of the
// stores peers can make this node hold (docs/security.md, "Bounds"), read
// on each scrape: the DHT record and provider stores with their refusals
// at a bound, the cards read from the DHT and refused, and the document
// updates refused. A refusal that concerns one peer is also a security
// event (nova_security_events_total, by code); these series say how full
// the shared stores are and how often a bound or a check said no.
type serviceCollector struct {
	disc   *discovery.Service
	docs   *crdt.Manager
	forgot *atomic.Uint64 // peers dropped from the peerstore (connhealth.ForgetPeers)
}

var (
	descDHTRecords = prometheus.NewDesc("nova_dht_records",
		"DHT value records this node stores for its peers.", nil, nil)
	descDHTRecordBytes = prometheus.NewDesc("nova_dht_record_bytes",
		"Bytes of the DHT value records stored (keys and values).", nil, nil)
	descDHTRecordAuthors = prometheus.NewDesc("nova_dht_record_authors",
		"Distinct authors of the DHT value records stored.", nil, nil)
	descDHTRecordsRefused = prometheus.NewDesc("nova_dht_records_refused_total",
		"DHT puts refused because the author's or the store's bound was reached.", nil, nil)
	descDHTProviders = prometheus.NewDesc("nova_dht_providers",
		"DHT provider records this node stores for its peers.", nil, nil)
	descDHTProvidersRefused = prometheus.NewDesc("nova_dht_providers_refused_total",
		"DHT provides refused because the peer's or the store's bound was reached.", nil, nil)
	descDHTCardsRefused = prometheus.NewDesc("nova_dht_cards_refused_total",
		"Agent cards read from the DHT and refused: stale, future-dated, forged or mismatched.", nil, nil)
	descDiscoveryRejoins = prometheus.NewDesc("nova_discovery_rejoins_total",
		"Times this node, left with no connection, dialled the peers it joined through by hand again.", nil, nil)
	descPeersForgotten = prometheus.NewDesc("nova_peers_forgotten_total",
		"Peers whose protocols, metadata and key left the peerstore after they had had no connection for 30 s.", nil, nil)
	descDocUpdatesRefused = prometheus.NewDesc("nova_crdt_updates_refused_total",
		"Shared-document updates from peers refused: undecodable, forged or invalid, on gossip and in catch-up answers.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c serviceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDHTRecords, descDHTRecordBytes, descDHTRecordAuthors,
		descDHTRecordsRefused, descDHTProviders, descDHTProvidersRefused, descDHTCardsRefused, descDiscoveryRejoins, descDocUpdatesRefused, descPeersForgotten} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c serviceCollector) Collect(ch chan<- prometheus.Metric) {
	if c.disc != nil {
		st := c.disc.Stats()
		ch <- prometheus.MustNewConstMetric(descDHTRecords, prometheus.GaugeValue, float64(st.Records))
		ch <- prometheus.MustNewConstMetric(descDHTRecordBytes, prometheus.GaugeValue, float64(st.RecordBytes))
		ch <- prometheus.MustNewConstMetric(descDHTRecordAuthors, prometheus.GaugeValue, float64(st.RecordAuthors))
		ch <- prometheus.MustNewConstMetric(descDHTRecordsRefused, prometheus.CounterValue, float64(st.RecordsRefused))
		ch <- prometheus.MustNewConstMetric(descDHTProviders, prometheus.GaugeValue, float64(st.Providers))
		ch <- prometheus.MustNewConstMetric(descDHTProvidersRefused, prometheus.CounterValue, float64(st.ProvidersRefused))
		ch <- prometheus.MustNewConstMetric(descDHTCardsRefused, prometheus.CounterValue, float64(st.CardsRefused))
		ch <- prometheus.MustNewConstMetric(descDiscoveryRejoins, prometheus.CounterValue, float64(st.Rejoins))
	}
	if c.docs != nil {
		ch <- prometheus.MustNewConstMetric(descDocUpdatesRefused, prometheus.CounterValue, float64(c.docs.Rejected()))
	}
	if c.forgot != nil {
		ch <- prometheus.MustNewConstMetric(descPeersForgotten, prometheus.CounterValue, float64(c.forgot.Load()))
	}
}
