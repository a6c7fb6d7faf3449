# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Paging through Zaqar's controllers ends, whatever the driver repeats."""

import itertools
from unittest import mock

import testtools

from zaqar_filtering import zaqar_storage

#: More list calls than any test needs: a loop that does not end fails.
MOST_CALLS = 50


class RankPager:
    """Pages like Zaqar's redis controllers.

    :param restart_on_first: page like the redis queue controller, whose
        ``start = rank + 1 if rank else 0`` restarts at the top when the
        marker ranks first.
    """

    def __init__(self, items, restart_on_first=False):
        self.items = list(items)
        self.restart_on_first = restart_on_first
        self.calls = 0

    def list(self, marker, limit):
        self.calls += 1
        if self.calls > MOST_CALLS:
            raise AssertionError('the listing did not end')
        rank = self.items.index(marker) if marker is not None else None
        if self.restart_on_first:
            start = rank + 1 if rank else 0
        else:
            start = rank + 1 if rank is not None else 0
        page = self.items[start:start + limit]
        yield iter(page)
        yield page[-1] if page else None


class QueueController(RankPager):

    def list(self, project=None, marker=None, limit=10):
        pages = super().list(marker, limit)
        yield ({'name': name} for name in next(pages))
        yield next(pages)


class SubscriptionController(RankPager):

    def list(self, queue, project=None, marker=None, limit=10):
        pages = super().list(marker, limit)
        yield ({'id': sub_id} for sub_id in next(pages))
        yield next(pages)


class ListQueuesTest(testtools.TestCase):

    def queues(self, controller, page_size):
        control = mock.Mock(queue_controller=controller)
        with mock.patch.object(zaqar_storage, 'PAGE_SIZE', page_size):
            return list(zaqar_storage.list_queues(control, 'p'))

    def test_one_queue_with_the_redis_restart_ends(self):
        controller = QueueController(['orders'], restart_on_first=True)
        self.assertEqual(['orders'], self.queues(controller, 1000))
        self.assertLessEqual(controller.calls, 2)

    def test_every_queue_once_whatever_the_page_size(self):
        names = ['q%02d' % number for number in range(7)]
        for page_size, restart in itertools.product((1, 2, 3, 7, 1000),
                                                    (False, True)):
            controller = QueueController(names, restart_on_first=restart)
            found = self.queues(controller, page_size)
            if restart and page_size == 1:
                # Zaqar's redis driver cannot page past the first queue
                # one at a time; the listing still ends.
                self.assertEqual(names[:1], found)
            else:
                self.assertEqual(names, found, (page_size, restart))

    def test_no_queue(self):
        self.assertEqual([], self.queues(QueueController([]), 10))


class ListSubscriptionsTest(testtools.TestCase):

    def subscriptions(self, controller, page_size):
        with mock.patch.object(zaqar_storage, 'PAGE_SIZE', page_size):
            return [sub['id'] for sub in zaqar_storage.list_subscriptions(
                controller, 'p', 'q')]

    def test_every_subscription_once_on_any_page_size(self):
        ids = ['s%d' % number for number in range(5)]
        for page_size in (1, 2, 5, 1000):
            self.assertEqual(ids, self.subscriptions(
                SubscriptionController(ids), page_size))

    def test_a_driver_that_repeats_its_page_ends(self):
        # Whatever the marker, the same page and the same next marker.
        controller = mock.Mock(list=lambda *args, **kwargs:
                               SubscriptionController(['a', 'b']).list('q'))
        self.assertEqual(['a', 'b'], self.subscriptions(controller, 2))

    def test_a_short_page_in_mid_listing_does_not_end_it(self):
        # Zaqar's redis driver skips expired subscriptions on a page.
        pages = iter([['a'], ['c', 'd'], []])

        def list_page(queue, project=None, marker=None, limit=10):
            page = next(pages)
            yield ({'id': sub_id} for sub_id in page)
            yield page[-1] if page else None

        controller = mock.Mock(list=list_page)
        self.assertEqual(['a', 'c', 'd'], self.subscriptions(controller, 2))
