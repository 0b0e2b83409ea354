// How the chat writes what a reply or a conversation cost.
import { describe, expect, it } from "vitest";
import { costText } from "../src/usage";

describe("a cost", () => {
  it("shows cents, four places under a cent, and a bound under the smallest it can show", () => {
    expect([1.234, 0.0123, 0.0031, 0.00003, 0, null].map(costText))
      .toEqual(["$1.23", "$0.01", "$0.0031", "<$0.0001", "$0.0000", ""]);
  });
});
