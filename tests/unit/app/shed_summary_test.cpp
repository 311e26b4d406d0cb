#include "shed_summary.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace floodgate::app {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds k10s{10'000};

const std::vector<std::string> kPools{"api", "web"};

// Totals for the unrouted slot and kPools.
ShedCounts counts() {
  ShedCounts c;
  c.refused.resize(kPools.size() + 1);
  return c;
}
uint64_t& at(ShedCounts& c, std::size_t slot, Reason r) {
  return c.refused[slot][shed_reason_index(r)];
}
constexpr std::size_t kApi = ReactorMetrics::slot_for(0);
constexpr std::size_t kWeb = ReactorMetrics::slot_for(1);

// The status each reason answers with, as reason.h has it (not written out here: the statuses
// of refusals may change).
std::string status(Reason r) {
  return std::to_string(info(r).status);
}

std::vector<std::string> texts(const std::vector<ShedLine>& lines) {
  std::vector<std::string> out;
  for (const ShedLine& l : lines) out.push_back(l.text);
  return out;
}

TEST(ShedSummary, WritesOneWarningPerUpstreamAndReasonThatRefusedInTheInterval) {
  ShedSummary s;
  ShedCounts c = counts();
  at(c, kApi, Reason::route_cap) = 1234;
  at(c, kApi, Reason::rate_limited) = 7;
  const std::vector<ShedLine> lines = s.summarise(c, k10s, kPools);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(lines[0].warning);
  EXPECT_EQ(lines[0].text,
            "shedding: upstream=api reason=route_cap refused=1234 in the last 10s "
            "(status " +
                status(Reason::route_cap) + ")");
  EXPECT_EQ(lines[1].text,
            "shedding: upstream=api reason=rate_limited refused=7 in the last 10s "
            "(status " +
                status(Reason::rate_limited) + ")");
}

TEST(ShedSummary, CountsOnlyWhatWasRefusedSinceThePreviousRead) {
  ShedSummary s;
  ShedCounts c = counts();
  at(c, kWeb, Reason::proxy_overloaded) = 100;
  s.summarise(c, k10s, kPools);
  at(c, kWeb, Reason::proxy_overloaded) = 130;
  EXPECT_EQ(texts(s.summarise(c, k10s, kPools)),
            std::vector<std::string>{"shedding: upstream=web reason=proxy_overloaded refused=30 "
                                     "in the last 10s (status " +
                                     status(Reason::proxy_overloaded) + ")"});
}

TEST(ShedSummary, NamesARefusalBeforeRoutingWithADash) {
  ShedSummary s;
  ShedCounts c = counts();
  at(c, ReactorMetrics::kUnroutedSlot, Reason::inflight_cap) = 87;
  EXPECT_EQ(texts(s.summarise(c, milliseconds(1'500), kPools)),
            std::vector<std::string>{"shedding: upstream=- reason=inflight_cap refused=87 in the "
                                     "last 1.5s (status " +
                                     status(Reason::inflight_cap) + ")"});
}

TEST(ShedSummary, SaysWhatShadowModeWouldHaveRefusedAsInformation) {
  ShedSummary s;
  ShedCounts c = counts();
  c.shadow[shed_reason_index(Reason::inflight_cap)] = 12;
  const std::vector<ShedLine> lines = s.summarise(c, k10s, kPools);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_FALSE(lines[0].warning);
  EXPECT_EQ(lines[0].text,
            "shedding (shadow): reason=inflight_cap would_refuse=12 in the last 10s");
}

TEST(ShedSummary, WritesNothingWhileNothingIsRefused) {
  ShedSummary s;
  ShedCounts c = counts();
  EXPECT_TRUE(s.summarise(c, k10s, kPools).empty());
  at(c, kApi, Reason::memory_pressure) = 0;
  EXPECT_TRUE(s.summarise(c, k10s, kPools).empty());
}

TEST(ShedSummary, SaysSheddingEndedOnceTheIntervalAfterTheLastRefusalWithTheEpisodesTotal) {
  ShedSummary s;
  ShedCounts c = counts();
  at(c, kApi, Reason::brownout) = 40;
  s.summarise(c, k10s, kPools);
  at(c, kApi, Reason::brownout) = 50;
  at(c, kApi, Reason::route_cap) = 5;
  s.summarise(c, k10s, kPools);
  const std::vector<ShedLine> ended = s.summarise(c, k10s, kPools);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_FALSE(ended[0].warning);
  EXPECT_EQ(ended[0].text, "shedding ended: upstream=api refused=55 over 20s");
  EXPECT_TRUE(s.summarise(c, k10s, kPools).empty());  // said once
}

TEST(ShedSummary, EndsEachUpstreamOnItsOwn) {
  ShedSummary s;
  ShedCounts c = counts();
  at(c, kApi, Reason::circuit_open) = 3;
  at(c, kWeb, Reason::circuit_open) = 4;
  s.summarise(c, k10s, kPools);
  at(c, kWeb, Reason::circuit_open) = 6;
  const std::vector<std::string> lines = texts(s.summarise(c, k10s, kPools));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("shedding: upstream=web reason=circuit_open refused=2 ", 0), 0u);
  EXPECT_EQ(lines[1], "shedding ended: upstream=api refused=3 over 10s");
}

TEST(ShedSummary, SaysShadowSheddingEnded) {
  ShedSummary s;
  ShedCounts c = counts();
  c.shadow[shed_reason_index(Reason::rate_limited)] = 9;
  s.summarise(c, k10s, kPools);
  EXPECT_EQ(texts(s.summarise(c, k10s, kPools)),
            std::vector<std::string>{"shedding ended (shadow): would_refuse=9 over 10s"});
}

TEST(ShedSummary, ShowsTheLargestCountsFirstAndFoldsTheRestIntoOneLine) {
  ShedSummary s;
  const std::vector<std::string> many(30, "u");
  ShedCounts c;
  c.refused.resize(many.size() + 1);
  for (std::size_t slot = 1; slot <= many.size(); ++slot) at(c, slot, Reason::brownout) = slot;
  const std::vector<ShedLine> lines = s.summarise(c, k10s, many);
  ASSERT_EQ(lines.size(), ShedSummary::kMaxLines + 1);
  EXPECT_EQ(lines[0].text.rfind("shedding: upstream=u reason=brownout refused=30 ", 0), 0u);
  EXPECT_EQ(lines[ShedSummary::kMaxLines - 1].text.rfind("shedding: upstream=u reason=brownout "
                                                         "refused=11 ",
                                                         0),
            0u);
  // 10 pairs left, refused 1 + ... + 10 = 55.
  EXPECT_EQ(lines.back().text,
            "shedding: 10 more upstream and reason pair(s) refused=55 in the last 10s");
  EXPECT_TRUE(lines.back().warning);
}

TEST(ShedSummary, FoldsTheEndedLinesBeyondTheCapIntoOneLine) {
  ShedSummary s;
  const std::vector<std::string> many(25, "u");
  ShedCounts c;
  c.refused.resize(many.size() + 1);
  for (std::size_t slot = 1; slot <= many.size(); ++slot) at(c, slot, Reason::global_cap) = 1;
  s.summarise(c, k10s, many);
  const std::vector<ShedLine> lines = s.summarise(c, k10s, many);
  ASSERT_EQ(lines.size(), ShedSummary::kMaxLines + 1);
  EXPECT_EQ(lines.back().text, "shedding ended: 5 more upstream(s)");
}

TEST(ShedSummary, RebaseCountsFromTheGivenTotalsAndForgetsWhoWasShedding) {
  ShedSummary s;
  ShedCounts c = counts();
  at(c, kApi, Reason::adaptive_limit) = 10;
  s.summarise(c, k10s, kPools);
  at(c, kApi, Reason::adaptive_limit) = 500;
  s.rebase(c);
  EXPECT_TRUE(s.summarise(c, k10s, kPools).empty());  // no refusal, and no "ended" either
}

TEST(ShedSummary, TotalsLowerThanThePreviousOnesCountAsNone) {
  ShedSummary s;
  ShedCounts c = counts();
  at(c, kApi, Reason::pending_timeout) = 10;
  s.summarise(c, k10s, kPools);
  at(c, kApi, Reason::pending_timeout) = 4;
  EXPECT_EQ(texts(s.summarise(c, k10s, kPools)),
            std::vector<std::string>{"shedding ended: upstream=api refused=10 over 10s"});
}

TEST(ShedSummary, SummarisesAPoolThatAReloadAdded) {
  ShedSummary s;
  ShedCounts c;
  c.refused.resize(2);  // the unrouted slot and "api"
  s.summarise(c, k10s, std::vector<std::string>{"api"});
  c = counts();  // "web" added
  at(c, kWeb, Reason::no_healthy_backend) = 2;
  EXPECT_EQ(texts(s.summarise(c, k10s, kPools)),
            std::vector<std::string>{"shedding: upstream=web reason=no_healthy_backend refused=2 "
                                     "in the last 10s (status " +
                                     status(Reason::no_healthy_backend) + ")"});
}

TEST(ShedSeconds, RoundsToATenthOfASecondAndDropsAZeroTenth) {
  EXPECT_EQ(shed_seconds(milliseconds(10'003)), "10s");
  EXPECT_EQ(shed_seconds(milliseconds(9'996)), "10s");
  EXPECT_EQ(shed_seconds(milliseconds(1'500)), "1.5s");
  EXPECT_EQ(shed_seconds(milliseconds(0)), "0s");
}

TEST(ReadShedCounts, SumsTheReactorsShardsBySlotAndReason) {
  ReactorMetrics a(4), b(4);
  a.refused(kApi, Reason::route_cap);
  b.refused(kApi, Reason::route_cap);
  b.refused(ReactorMetrics::kUnroutedSlot, Reason::inflight_cap);
  const ReactorMetrics* shards[] = {&a, &b};
  const ShedCounts c = read_shed_counts(shards, 2);
  ASSERT_EQ(c.refused.size(), 3u);
  EXPECT_EQ(c.refused[kApi][shed_reason_index(Reason::route_cap)], 2u);
  EXPECT_EQ(c.refused[0][shed_reason_index(Reason::inflight_cap)], 1u);
  EXPECT_EQ(c.refused[kWeb][shed_reason_index(Reason::route_cap)], 0u);
}

TEST(ReadShedCounts, ReadsShadowModeByReasonAndLeavesOutThePolicyRefusals) {
  ReactorMetrics m(1);
  m.shadow_rejected(StageId::inflight, Reason::inflight_cap);
  m.shadow_rejected(StageId::protocol, Reason::denied_path);
  const ReactorMetrics* shards[] = {&m};
  const ShedCounts c = read_shed_counts(shards, 1);
  EXPECT_EQ(c.shadow[shed_reason_index(Reason::inflight_cap)], 1u);
  uint64_t all = 0;
  for (uint64_t n : c.shadow) all += n;
  EXPECT_EQ(all, 1u);
}

}  // namespace
}  // namespace floodgate::app
