// The XML reader over libxml2: structure, attributes, comments, entities and encodings, and errors
// that name the input, line and column.
#include "sumcast/topo/xml_reader.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "topology_test_util.h"

namespace sumcast::topo {
namespace {

TEST(XmlReader, NestedElementsAttributesAndText) {
  auto r = parse_xml(
      "<?xml version=\"1.0\"?>\n<!-- head -->\n<a x='1' y=\"two\">\n  <b z=\"3\"/>\n  text &amp; more\n"
      "  <c><![CDATA[<raw>]]></c>\n</a>\n<!-- tail -->\n",
      "t");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->name, "a");
  ASSERT_NE(r->attribute("x"), nullptr);
  EXPECT_EQ(*r->attribute("x"), "1");
  EXPECT_EQ(r->attribute_or("y", ""), "two");
  EXPECT_EQ(r->attribute("missing"), nullptr);
  ASSERT_EQ(r->children.size(), 2u);
  EXPECT_EQ(r->children[0].name, "b");
  EXPECT_EQ(r->children[0].line, 4);
  EXPECT_EQ(r->children[1].text, "<raw>");
  EXPECT_EQ(r->text, "text & more");
}

TEST(XmlReader, EntitiesInAttributes) {
  auto r = parse_xml("<a v=\"&lt;&gt;&quot;&apos;&#65;&#x42;\"/>", "t");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->attribute_or("v", ""), "<>\"'AB");
}

TEST(XmlReader, CommentsBetweenChildrenAndTrailingCommentsOnTheSameLine) {
  auto r = parse_xml("<s>\n <p/> <!-- one -->\n <!-- two --> <p/>\n</s>", "t");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->children.size(), 2u);
}

TEST(XmlReader, MismatchedCloseTagNamesBothLines) {
  auto r = parse_xml("<a>\n<b>\n</a>", "f.xml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("f.xml:3"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("line 2"), std::string::npos) << r.status().message();
}

TEST(XmlReader, ErrorsNameLineAndColumn) {
  auto r = parse_xml("<system>\n  <cpu numaid=0/>\n</system>\n", "host.xml");
  ASSERT_FALSE(r.ok());
  // libxml2 reports the unquoted value at line 2, column 15 (the character after '=').
  EXPECT_NE(r.status().message().find("host.xml:2:15:"), std::string::npos) << r.status().message();
}

TEST(XmlReader, DeclaredEncodingIsConvertedToUtf8) {
  // "caf\xe9" in ISO-8859-1 is "caf\xc3\xa9" in UTF-8.
  auto r = parse_xml("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>\n<a n=\"caf\xe9\">\xe9</a>", "t");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->attribute_or("n", ""), "caf\xc3\xa9");
  EXPECT_EQ(r->text, "\xc3\xa9");
}

TEST(XmlReader, InternalEntitiesExpandAndExternalOnesAreNotFetched) {
  auto r = parse_xml(
      "<!DOCTYPE a [<!ENTITY gpu \"GPU0\"><!ENTITY ext SYSTEM \"file:///etc/hostname\">]>\n<a n=\"&gpu;\">&ext;</a>",
      "t");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->attribute_or("n", ""), "GPU0");
  EXPECT_EQ(r->text, "");  // the external entity stays a reference: no file is read
}

TEST(XmlReader, RejectsMalformedInput) {
  for (const char* bad : {"", "no root", "<a>", "<a x=1/>", "<a x=\"1\" x=\"2\"/>", "<a/><b/>", "<a>&bogus;</a>",
                          "<a><!-- unterminated </a>", "<a v=\"&#0;\"/>", "<a x=\"1/>"}) {
    EXPECT_FALSE(parse_xml(bad, "t").ok()) << bad;
  }
}

TEST(XmlReader, ParsesEveryNcclFileOfTheTestData) {
  for (const char* f : {testing::kG5, testing::kP4d, testing::kNcv4, testing::kNdv2, testing::kNdv4, testing::kNdv5}) {
    std::ifstream in(testing::data_path(f));
    std::stringstream ss;
    ss << in.rdbuf();
    auto r = parse_xml(ss.str(), f);
    ASSERT_TRUE(r.ok()) << f << ": " << r.status().to_string();
    EXPECT_EQ(r->name, "system") << f;
    EXPECT_FALSE(r->children.empty()) << f;
  }
}

TEST(XmlReader, DeepNestingIsBounded) {
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "<a>";
  for (int i = 0; i < 300; ++i) deep += "</a>";
  EXPECT_FALSE(parse_xml(deep, "t").ok());
}

}  // namespace
}  // namespace sumcast::topo
